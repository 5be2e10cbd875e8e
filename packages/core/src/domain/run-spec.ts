import { z } from "zod";
import { APPROVAL_MODES, type ApprovalMode } from "./approval";
import { PIPELINE_PHASES, type PipelinePhase } from "./artifacts";
import { McpServerSpec } from "./mcp-server-spec";
import { NO_NUL, NOT_BLANK, SPEC_LIMITS } from "./spec-limits";

export { NOT_BLANK, SPEC_LIMITS } from "./spec-limits";

const command = z
  .string()
  .trim()
  .min(1, NOT_BLANK)
  .max(SPEC_LIMITS.command)
  .refine(...NO_NUL);
const sessionId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "must match [A-Za-z0-9_-]{1,64}");
/** Whether a relative path stays inside its base: no ".." takes it above where it starts. */
function staysInside(path: string): boolean {
  let depth = 0;
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    depth += part === ".." ? -1 : 1;
    if (depth < 0) return false;
  }
  return true;
}

/**
 * A focus file: a path relative to the workspace that stays inside it. Only named in the
 * prompt, but a prompt that points the agent at /etc/passwd or ../.. is not the run's to give.
 */
const focusFile = z
  .string()
  .min(1)
  .max(SPEC_LIMITS.filePath)
  .refine(
    (path) => !path.startsWith("/") && !path.includes("\0") && staysInside(path),
    "must be a path relative to the workspace, inside it",
  );

export const CommandAgentSpec = z.strictObject({
  type: z.literal("command"),
  command,
  /** @defaultValue 600000 (10 minutes) */
  timeoutMs: z
    .number()
    .int()
    .min(100)
    .max(24 * 3_600_000)
    .default(600_000),
});
export type CommandAgentSpec = z.infer<typeof CommandAgentSpec>;

export const MistralAgentSpec = z.strictObject({
  type: z.literal("mistral"),
  /** @defaultValue the worker's LOOPRUN_MISTRAL_MODEL (mistral-large-latest) */
  model: z.string().trim().min(1, NOT_BLANK).max(200).optional(),
  /** Plan first (a JSON plan of steps, tracked and re-planned when a step keeps failing). */
  plan: z.boolean().default(false),
  /** @defaultValue 40 — tool calls per iteration */
  maxToolCalls: z.number().int().min(1).max(1000).default(40),
  temperature: z.number().min(0).max(2).optional(),
});
export type MistralAgentSpec = z.infer<typeof MistralAgentSpec>;

export const AgentSpec = z.discriminatedUnion("type", [CommandAgentSpec, MistralAgentSpec]);
export type AgentSpec = z.infer<typeof AgentSpec>;

const reviewModel = z.string().trim().min(1, NOT_BLANK).max(200).optional();

/**
 * `sh -c COMMAND` in the workspace; stdin is JSON `{task, requirements, iteration, diff,
 * validation}`, stdout must be JSON `{blockingIssues, nonBlockingIssues, score, fixPlan}`.
 */
export const CommandReviewSpec = z.strictObject({
  type: z.literal("command"),
  command,
  /** @defaultValue 600000 (10 minutes) */
  timeoutMs: z
    .number()
    .int()
    .min(100)
    .max(24 * 3_600_000)
    .default(600_000),
});
export type CommandReviewSpec = z.infer<typeof CommandReviewSpec>;

/** One structured LLM review of the change, the validation results and the requirements. */
export const MistralReviewSpec = z.strictObject({
  type: z.literal("mistral"),
  /** @defaultValue the worker's LOOPRUN_MISTRAL_MODEL */
  model: reviewModel,
});
export type MistralReviewSpec = z.infer<typeof MistralReviewSpec>;

/** A blind reviewer reads only the change; a second pass compares its reading with the requirements. */
export const TriangularReviewSpec = z.strictObject({
  type: z.literal("triangular"),
  /** @defaultValue the worker's LOOPRUN_MISTRAL_MODEL */
  model: reviewModel,
});
export type TriangularReviewSpec = z.infer<typeof TriangularReviewSpec>;

export const ReviewSpec = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("none") }),
  CommandReviewSpec,
  MistralReviewSpec,
  TriangularReviewSpec,
]);
export type ReviewSpec = z.infer<typeof ReviewSpec>;

/** `phases`: a subset of the pipeline phases, each at most once, in their order. */
export const PhasesSpec = z
  .array(z.enum(PIPELINE_PHASES))
  .max(PIPELINE_PHASES.length)
  .refine(
    (list) =>
      list.every(
        (phase, i) =>
          i === 0 || PIPELINE_PHASES.indexOf(phase) > PIPELINE_PHASES.indexOf(list[i - 1]!),
      ),
    `must list each phase at most once, in the order ${PIPELINE_PHASES.join(", ")}`,
  );

/**
 * A check's `when`: the body is an object and the fields `keys` parsed without an issue (an
 * unknown key elsewhere does not matter).
 */
function validAt(...keys: string[]) {
  return (payload: z.core.ParsePayload) =>
    typeof payload.value === "object" &&
    payload.value !== null &&
    !payload.issues.some((issue) => {
      const [first] = issue.path ?? [];
      return first === undefined
        ? issue.code !== "unrecognized_keys"
        : keys.includes(String(first));
    });
}

export const RunSubmission = z
  .strictObject({
    task: z.string().trim().min(1, NOT_BLANK).max(SPEC_LIMITS.task),
    sessionId: sessionId.optional(),
    requirements: z.string().max(SPEC_LIMITS.requirements).optional(),
    filePaths: z.array(focusFile).max(SPEC_LIMITS.listItems).optional(),
    workspace: z
      .string()
      .min(1)
      .max(SPEC_LIMITS.filePath)
      .regex(/^[A-Za-z0-9._/-]+$/, "may hold only ASCII letters and digits, '.', '_', '-' and '/'")
      // A longer name can never be made (NAME_MAX): refused now, not as the run's failure.
      .refine(
        (path) => path.split("/").every((part) => part.length <= 255),
        "each name in the path must be at most 255 characters",
      )
      .optional(),
    testCommand: command.optional(),
    validationCommands: z.array(command).max(SPEC_LIMITS.listItems).optional(),
    /** @defaultValue 600000 per validation command */
    validationTimeoutMs: z
      .number()
      .int()
      .min(100)
      .max(24 * 3_600_000)
      .optional(),
    completionPromise: z
      .string()
      .trim()
      .min(1, NOT_BLANK)
      .max(200)
      // It is printed on a line of its own (see CompletionPromiseScanner).
      .refine((text) => !/[\r\n]/.test(text), "must be one line")
      .optional(),
    agent: AgentSpec,
    review: ReviewSpec.optional(),
    /** Pipeline phases: planning, architecture, design before iteration 1; packaging after success. */
    phases: PhasesSpec.optional(),
    mcpServers: z
      .array(McpServerSpec)
      .max(10)
      // Each refused name is named where it is (mcpServers.1.name), not the list as a whole.
      .superRefine((list, ctx) => {
        const seen = new Set<string>();
        list.forEach((server, i) => {
          const path = [i, "name"];
          if (server.name === "workspace")
            ctx.addIssue({ code: "custom", path, message: '"workspace" is the built-in server' });
          else if (seen.has(server.name))
            ctx.addIssue({ code: "custom", path, message: "server names must be unique" });
          seen.add(server.name);
        });
      })
      .optional(),
    maxIterations: z.number().int().min(1).max(1000).optional(),
    maxAttempts: z.number().int().min(1).max(1000).optional(),
    maxMinutes: z
      .number()
      .positive()
      .max(7 * 24 * 60)
      .optional(),
    maxTokens: z.number().int().positive().optional(),
    cooldownMs: z
      .number()
      .int()
      .min(0)
      .max(24 * 3_600_000)
      .optional(),
    /** Fraction of the validation commands that must pass (0 < t ≤ 1). @defaultValue 1 */
    successThreshold: z
      .number()
      .gt(0, "must be greater than 0")
      .max(1, "must be at most 1")
      .optional(),
    /** Iterations in a row without progress that end the run as `stalled`. @defaultValue 3 */
    maxStalledIterations: z.number().int().min(1).max(1000).optional(),
    /** Put the workspace back as it was before the run when the run ends `failed`. */
    rollbackOnFailure: z.boolean().optional(),
    /** `plan`: pause after planning (status `awaiting_approval`) until a person approves. @defaultValue "none" */
    approval: z.enum(APPROVAL_MODES).optional(),
  })
  // Each check runs when the fields it reads are valid, even if others are not: a body with
  // several problems hears of all of them at once (no gate besides a missing agent, say).
  .refine(
    (body) =>
      body.approval !== "plan" ||
      (body.agent.type === "mistral" && body.agent.plan === true) ||
      (body.phases ?? []).includes("planning"),
    {
      path: ["approval"],
      message:
        'needs a plan to approve: an agent {"type": "mistral", "plan": true} or "planning" in phases',
      when: validAt("agent", "phases", "approval"),
    },
  )
  .refine((body) => (body.mcpServers ?? []).length === 0 || body.agent.type === "mistral", {
    path: ["mcpServers"],
    message: "only the mistral agent takes MCP servers (a command agent starts its own tools)",
    when: validAt("agent", "mcpServers"),
  })
  .refine(
    (body) =>
      body.testCommand !== undefined ||
      (body.validationCommands?.length ?? 0) > 0 ||
      body.completionPromise !== undefined ||
      (body.review !== undefined && body.review.type !== "none"),
    {
      path: [],
      message:
        "at least one gate is required: testCommand, validationCommands, completionPromise or review",
      when: validAt("testCommand", "validationCommands", "completionPromise", "review"),
    },
  );
export type RunSubmission = z.infer<typeof RunSubmission>;

/** What a run executes, with every default applied. Stored with the run. */
export interface RunSpec {
  task: string;
  requirements: string | null;
  filePaths: string[];
  /** The submitted `testCommand` (null: none; absent from runs stored before it was kept). */
  testCommand?: string | null;
  /** Commands that must all exit 0: `testCommand` first, then `validationCommands`. */
  validationCommands: string[];
  validationTimeoutMs: number;
  completionPromise: string | null;
  agent: AgentSpec;
  mcpServers: McpServerSpec[];
  review: ReviewSpec;
  /** Pipeline phases to run (see `PIPELINE_PHASES`); empty: none. */
  phases: PipelinePhase[];
  maxIterations: number;
  maxMinutes: number;
  maxTokens: number | null;
  cooldownMs: number;
  /** Fraction of the validation commands that must exit 0 for validation to pass. */
  successThreshold: number;
  /** Iterations in a row that change nothing and fail the same way before the run is `stalled`. */
  maxStalledIterations: number;
  /** Restore the baseline snapshot when the run ends `failed`. */
  rollbackOnFailure: boolean;
  /** `plan`: the run waits (`awaiting_approval`) after planning until a person approves. */
  approval: ApprovalMode;
}

export const SPEC_DEFAULTS = {
  maxIterations: 6,
  maxMinutes: 45,
  cooldownMs: 1000,
  validationTimeoutMs: 600_000,
  successThreshold: 1,
  maxStalledIterations: 3,
} as const;

/** Applies defaults; `maxIterations` wins over the legacy `maxAttempts`. */
export function normalizeSubmission(body: RunSubmission): RunSpec {
  return {
    task: body.task,
    requirements: body.requirements ?? null,
    filePaths: body.filePaths ?? [],
    testCommand: body.testCommand ?? null,
    validationCommands: [
      ...(body.testCommand !== undefined ? [body.testCommand] : []),
      ...(body.validationCommands ?? []),
    ],
    validationTimeoutMs: body.validationTimeoutMs ?? SPEC_DEFAULTS.validationTimeoutMs,
    completionPromise: body.completionPromise ?? null,
    agent: body.agent,
    mcpServers: body.mcpServers ?? [],
    review: body.review ?? { type: "none" },
    phases: body.phases ?? [],
    maxIterations: body.maxIterations ?? body.maxAttempts ?? SPEC_DEFAULTS.maxIterations,
    maxMinutes: body.maxMinutes ?? SPEC_DEFAULTS.maxMinutes,
    maxTokens: body.maxTokens ?? null,
    cooldownMs: body.cooldownMs ?? SPEC_DEFAULTS.cooldownMs,
    successThreshold: body.successThreshold ?? SPEC_DEFAULTS.successThreshold,
    maxStalledIterations: body.maxStalledIterations ?? SPEC_DEFAULTS.maxStalledIterations,
    rollbackOnFailure: body.rollbackOnFailure ?? false,
    approval: body.approval ?? "none",
  };
}
