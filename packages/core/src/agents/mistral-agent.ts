import type { Plan } from "../domain/plan";
import type { ChatMessage, ChatModel, ChatTool } from "../llm/chat-model";
import { ChatModelError } from "../llm/chat-model";
import { keptTail } from "../util/cut-marks";
import {
  parsePlanAnswer,
  planFromAnswer,
  REPLAN_AFTER_FAILURES,
  renderPlan,
  UpdateStepArgs,
} from "./plan";

export interface AgentTool extends ChatTool {
  server: string;
  tool: string;
}

/** The tools an agent may call (an MCP hub, in practice). `call` never throws. */
export interface AgentToolSet {
  tools: readonly AgentTool[];
  call(
    name: string,
    args: unknown,
    signal?: AbortSignal,
  ): Promise<{
    isError: boolean;
    result: string;
    durationMs: number;
    server: string;
    tool: string;
  }>;
}

export interface RecordedToolCall {
  server: string;
  tool: string;
  args: unknown;
  isError: boolean;
  result: string;
  durationMs: number;
}

/** Where the agent's actions are persisted and announced as they happen. */
export interface AgentRecorder {
  toolCall(call: RecordedToolCall): Promise<void>;
  tokens(count: number): Promise<void>;
  plan(
    type: "plan_created" | "plan_updated" | "step_completed",
    plan: Plan,
    data?: Record<string, unknown>,
  ): Promise<void>;
}

export interface MistralAgentInput {
  llm: ChatModel;
  model: string;
  temperature?: number;
  /** @defaultValue 40 */
  maxToolCalls: number;
  planning: boolean;
  /** The plan so far (from earlier iterations), if planning. */
  plan: Plan | null;
  toolSet: AgentToolSet;
  prompt: string;
  signal: AbortSignal;
  /** Tokens still allowed by the run's budget (Infinity without one). */
  tokensLeft: () => number;
  recorder: AgentRecorder;
  /** @defaultValue 65536 */
  outputCapBytes?: number;
}

export interface MistralAgentResult {
  /** 0 when the model finished with status "done" (or stopped calling tools); 1 otherwise. */
  exitCode: number;
  output: string;
  durationMs: number;
  plan: Plan | null;
  /** Set when a phase could not produce valid output (an invalid plan twice): the run fails. */
  phaseFailed: { phase: string; error: string } | null;
  /** The question of a model that called `finish` with status "blocked" (its summary). */
  blocked: string | null;
}

const FINISH: ChatTool = {
  name: "finish",
  description:
    "End your turn. Call it when the task is complete (status done) or when you cannot go on without help (status blocked, with the question in the summary).",
  parameters: {
    type: "object",
    properties: {
      summary: { type: "string", description: "What you did, or what blocks you" },
      status: { type: "string", enum: ["done", "blocked"] },
    },
    required: ["summary", "status"],
  },
};

const UPDATE_STEP: ChatTool = {
  name: "update_step",
  description:
    "Record progress on a step of the plan: in_progress when you start it, done or failed when it ends.",
  parameters: {
    type: "object",
    properties: {
      step: { type: "integer", description: "The step number" },
      status: { type: "string", enum: ["in_progress", "done", "failed"] },
      note: { type: "string", description: "What happened (why it failed)" },
    },
    required: ["step", "status"],
  },
};

const SYSTEM = [
  "You are a careful software engineering agent working inside one workspace directory.",
  "Act through the tools: read files before changing them, make focused edits, run commands to check your work.",
  "Paths are relative to the workspace. Do not repeat a tool call that already failed the same way.",
  'When the task is complete, call `finish` with status "done" and a short summary. If you cannot continue, call `finish` with status "blocked".',
].join("\n");

/** Three failed tool calls in a row end the iteration. */
export const MAX_CONSECUTIVE_TOOL_FAILURES = 3;

/**
 * The built-in LLM agent: decide → call a tool → feed the result back → adapt, until the
 * model calls `finish` or stops calling tools, within `maxToolCalls`.
 */
export async function runMistralAgent(input: MistralAgentInput): Promise<MistralAgentResult> {
  const started = performance.now();
  const transcript: string[] = [];
  const log = (line: string) => transcript.push(line);
  let plan = input.plan;
  let blocked: string | null = null;

  const done = (
    exitCode: number,
    phaseFailed: MistralAgentResult["phaseFailed"] = null,
  ): MistralAgentResult => {
    const cap = input.outputCapBytes ?? 65_536;
    const text = transcript.join("\n");
    return {
      exitCode,
      output: text.length > cap ? keptTail("earlier transcript", text.slice(-cap)) : text,
      durationMs: Math.round(performance.now() - started),
      plan,
      phaseFailed,
      blocked,
    };
  };

  const complete = completer(input, (count) => input.recorder.tokens(count));

  try {
    if (input.planning && plan === null) {
      const made = await makePlan(input, complete, null, null);
      if (!made.ok) {
        log(`planning failed: ${made.error}`);
        return done(1, { phase: "planning", error: made.error });
      }
      plan = made.plan;
      log(`plan v${plan.version}:\n${renderPlan(plan)}`);
      await input.recorder.plan("plan_created", plan, { steps: plan.steps.length });
    }

    const tools: ChatTool[] = [
      ...input.toolSet.tools.map(({ name, description, parameters }) => ({
        name,
        description,
        parameters,
      })),
      FINISH,
    ];
    if (plan) tools.push(UPDATE_STEP);
    const messages: ChatMessage[] = [
      { role: "system", content: SYSTEM },
      {
        role: "user",
        content: plan ? `${input.prompt}\n# Plan\n\n${renderPlan(plan)}\n` : input.prompt,
      },
    ];
    let calls = 0;
    let failuresInARow = 0;

    for (;;) {
      if (input.tokensLeft() <= 0) {
        log("stopped: the token budget is spent");
        return done(1);
      }
      const res = await complete(messages, tools);
      messages.push({ role: "assistant", content: res.content, toolCalls: res.toolCalls });
      if (res.content) log(res.content);
      if (res.toolCalls.length === 0) {
        log("(the model stopped calling tools)");
        return done(0);
      }
      for (const call of res.toolCalls) {
        let args: unknown;
        try {
          args = JSON.parse(call.arguments || "{}");
        } catch {
          args = undefined;
        }
        if (call.name === "finish") {
          const status = (args as { status?: unknown } | undefined)?.status;
          const summary = String((args as { summary?: unknown } | undefined)?.summary ?? "");
          log(`finish (${String(status)}): ${summary}`);
          if (status === "blocked") blocked = summary.trim() || "(the agent gave no question)";
          return done(status === "done" ? 0 : 1);
        }
        let outcome: { isError: boolean; result: string };
        if (args === undefined) {
          outcome = {
            isError: true,
            result: `the arguments of ${call.name} are not valid JSON: ${call.arguments.slice(0, 200)}`,
          };
        } else if (call.name === "update_step" && plan) {
          const updated = await updateStep(input, complete, plan, args);
          plan = updated.plan;
          outcome = updated.outcome;
        } else {
          const r = await input.toolSet.call(call.name, args, input.signal);
          await input.recorder.toolCall({
            server: r.server,
            tool: r.tool,
            args,
            isError: r.isError,
            result: r.result,
            durationMs: r.durationMs,
          });
          outcome = r;
        }
        calls += 1;
        log(
          `→ ${call.name}(${call.arguments.slice(0, 200)}) ${outcome.isError ? "✗" : "✓"} ${outcome.result.slice(0, 300)}`,
        );
        messages.push({
          role: "tool",
          toolCallId: call.id,
          name: call.name,
          content: outcome.result,
        });
        failuresInARow = outcome.isError ? failuresInARow + 1 : 0;
        if (failuresInARow >= MAX_CONSECUTIVE_TOOL_FAILURES) {
          log(
            `stopped: ${MAX_CONSECUTIVE_TOOL_FAILURES} tool calls in a row failed; the last: ${call.name}: ${outcome.result.slice(0, 500)}`,
          );
          return done(1);
        }
        if (calls >= input.maxToolCalls) {
          log(`stopped: the limit of ${input.maxToolCalls} tool calls was reached`);
          return done(1);
        }
      }
    }
  } catch (error) {
    if (error instanceof ChatModelError) {
      log(`the model could not be reached: ${error.message}`);
      return done(1);
    }
    throw error;
  }
}

type Complete = (
  messages: ChatMessage[],
  tools: ChatTool[],
  json?: boolean,
) => ReturnType<ChatModel["complete"]>;

type ModelSettings = Pick<MistralAgentInput, "llm" | "model" | "temperature" | "signal">;

/** One chat completion with the agent's model settings; its tokens are counted. */
function completer(input: ModelSettings, onTokens: (count: number) => Promise<void>): Complete {
  return async (messages, tools, json = false) => {
    const res = await input.llm.complete(
      {
        model: input.model,
        messages,
        ...(tools.length > 0 ? { tools } : {}),
        ...(json ? { json: true } : {}),
        ...(input.temperature !== undefined ? { temperature: input.temperature } : {}),
      },
      input.signal,
    );
    await onTokens(res.usage.totalTokens);
    return res;
  };
}

/**
 * Makes the agent's plan ahead of iteration 1 (the run's `approval: "plan"`: a person approves
 * it first); the agent then finds the plan on the run and does not plan again.
 */
export async function makeAgentPlan(
  input: ModelSettings & { prompt: string; onTokens: (count: number) => Promise<void> },
): Promise<{ ok: true; plan: Plan } | { ok: false; error: string }> {
  try {
    return await makePlan(input, completer(input, input.onTokens), null, null);
  } catch (error) {
    if (error instanceof ChatModelError) {
      return { ok: false, error: `the model could not be reached: ${error.message}` };
    }
    throw error;
  }
}

/** Asks for a JSON plan; an invalid answer is asked again once with the error. */
async function makePlan(
  input: { prompt: string },
  complete: Complete,
  previous: Plan | null,
  reason: string | null,
): Promise<{ ok: true; plan: Plan } | { ok: false; error: string }> {
  const ask = [
    "Before acting, plan the work. Answer with a JSON object only:",
    '{"steps": [{"title": "…", "detail": "…"}]} — 1 to 30 concrete steps, in order.',
    previous ? `\nThe previous plan:\n${renderPlan(previous)}\nRe-plan because: ${reason}` : "",
  ].join("\n");
  const messages: ChatMessage[] = [
    { role: "system", content: SYSTEM },
    { role: "user", content: `${input.prompt}\n${ask}` },
  ];
  let error = "";
  for (let attempt = 1; attempt <= 2; attempt++) {
    const res = await complete(messages, [], true);
    const parsed = parsePlanAnswer(res.content);
    if (parsed.ok) return { ok: true, plan: planFromAnswer(parsed.plan, previous, reason) };
    error = parsed.error;
    messages.push({ role: "assistant", content: res.content ?? "" });
    messages.push({
      role: "user",
      content: `That plan is invalid (${error}). Answer again with the JSON object only.`,
    });
  }
  return { ok: false, error: `invalid plan twice: ${error}` };
}

async function updateStep(
  input: MistralAgentInput,
  complete: Complete,
  plan: Plan,
  args: unknown,
): Promise<{ plan: Plan; outcome: { isError: boolean; result: string } }> {
  const parsed = UpdateStepArgs.safeParse(args);
  const step = parsed.success ? plan.steps.find((s) => s.id === parsed.data.step) : undefined;
  if (!parsed.success || !step) {
    return {
      plan,
      outcome: {
        isError: true,
        result: `invalid update_step: give an existing step number (1–${plan.steps.length}) and a status`,
      },
    };
  }
  const { status, note } = parsed.data;
  const next: Plan = {
    ...plan,
    steps: plan.steps.map((s) =>
      s.id === step.id
        ? {
            ...s,
            status,
            note: note ?? s.note,
            failures: s.failures + (status === "failed" ? 1 : 0),
          }
        : s,
    ),
  };
  const updated = next.steps.find((s) => s.id === step.id) ?? step;
  if (status === "done") {
    await input.recorder.plan("step_completed", next, { step: step.id, title: step.title });
  }
  if (status === "failed" && updated.failures >= REPLAN_AFTER_FAILURES) {
    const reason = `step ${step.id} ("${step.title}") failed ${updated.failures} times: ${note ?? "no reason given"}`;
    const made = await makePlan(input, complete, next, reason);
    if (made.ok) {
      await input.recorder.plan("plan_updated", made.plan, {
        reason,
        steps: made.plan.steps.length,
      });
      return {
        plan: made.plan,
        outcome: { isError: false, result: `Re-planned. The new plan:\n${renderPlan(made.plan)}` },
      };
    }
  }
  if (status !== "done") {
    await input.recorder.plan("plan_updated", next, { step: step.id, status });
  }
  return { plan: next, outcome: { isError: false, result: `step ${step.id} is ${status}` } };
}
