import { z } from "zod";
import type { Plan } from "../domain/plan";
import type { ChatMessage, ChatModel, ChatTool } from "../llm/chat-model";
import { ChatModelError } from "../llm/chat-model";
import { parseToolArguments } from "../tools/tool-arguments";
import { capHead, capTail } from "../util/cut-marks";
import { forPrompt } from "../util/for-prompt";
import { CompletionPromiseScanner } from "./completion-promise";
import { completer, makePlan, type PlanRecorder, SYSTEM, updateStep } from "./mistral-agent-plan";
import { renderPlan } from "./plan";

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
export interface AgentRecorder extends PlanRecorder {
  toolCall(call: RecordedToolCall): Promise<void>;
  tokens(count: number): Promise<void>;
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
  /**
   * Removes secrets from the transcript's text before it is cut (the engine's redactor): a
   * cut can leave a piece of a secret that a redactor no longer recognises afterwards.
   * @defaultValue none (the text is kept as it is)
   */
  redact?: (text: string) => string;
  /**
   * The run's completion promise: looked for in what the model says (its messages, its finish
   * summary), not in what its tools return (a file that holds the tag is no promise).
   */
  completionPromise?: string | null;
}

export interface MistralAgentResult {
  /**
   * 0 when the model finished with status "done" (or stopped calling tools); `null` when its
   * turn was cut by `signal` (a stop, the run's deadline: killed, as a command agent would be);
   * 1 otherwise.
   */
  exitCode: number | null;
  output: string;
  durationMs: number;
  /** Whether the model gave the completion promise; `null` when none was asked for. */
  promiseFound: boolean | null;
  /** A tag that was not the run's promise (see CompletionPromiseScanner.other). */
  promiseOther: string | null;
  plan: Plan | null;
  /** Set when a phase could not produce valid output (an invalid plan twice): the run fails. */
  phaseFailed: { phase: string; error: string } | null;
  /** The question of a model that called `finish` with status "blocked" (its summary). */
  blocked: string | null;
  /** The run's token budget ended the turn (the model had not finished). */
  budgetSpent: boolean;
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

/** What `finish` must be given; anything else is answered with an error the model can act on. */
const FinishArgs = z.object({ summary: z.string(), status: z.enum(["done", "blocked"]) });

/** Why `finish`'s arguments are refused, in a line the model reads. */
function finishProblem(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join(".") || "arguments"}: ${i.message}`).join("; ");
}

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

/** Three failed tool calls in a row end the iteration. */
export const MAX_CONSECUTIVE_TOOL_FAILURES = 3;

/** The agent's own tools (not the hub's): their calls are stored with server "". */
export const AGENT_TOOL_NAMES: readonly string[] = [FINISH.name, UPDATE_STEP.name];
const AGENT_TOOLS = new Set(AGENT_TOOL_NAMES);

/** Bytes of a call's arguments, and of its result, that the transcript shows (a line says the rest was cut). */
const TRANSCRIPT_ARGS_BYTES = 200;
const TRANSCRIPT_RESULT_BYTES = 300;
const TRANSCRIPT_LAST_ERROR_BYTES = 500;

/**
 * The built-in LLM agent: decide → call a tool → feed the result back → adapt, until the
 * model calls `finish` or stops calling tools, within `maxToolCalls`.
 */
export async function runMistralAgent(input: MistralAgentInput): Promise<MistralAgentResult> {
  const started = performance.now();
  const transcript: string[] = [];
  const redact = input.redact ?? ((text: string) => text);
  // Every line is redacted whole, then cut: never a piece of a secret is left at a cut.
  const log = (line: string) => transcript.push(redact(line));
  const clip = (text: string, capBytes: number) => capHead(redact(text), capBytes);
  // A line whose every piece is redacted already (clipped, or passed to `redact`): as it is.
  const logRedacted = (line: string) => transcript.push(line);
  let plan = input.plan;
  let blocked: string | null = null;
  const promise = input.completionPromise ?? null;
  const promiseScanner =
    promise === null ? null : new CompletionPromiseScanner(promise, input.prompt);
  /** What the model says, looked at for the promise (each piece its own lines). */
  const said = (text: string) => promiseScanner?.write(`${text}\n`);

  let budgetSpent = false;
  const done = (
    exitCode: number | null,
    phaseFailed: MistralAgentResult["phaseFailed"] = null,
  ): MistralAgentResult => {
    const cap = input.outputCapBytes ?? 65_536;
    return {
      exitCode,
      output: capTail(transcript.join("\n"), cap, "earlier transcript"),
      durationMs: Math.round(performance.now() - started),
      promiseFound: promiseScanner ? promiseScanner.found : null,
      promiseOther: promiseScanner ? promiseScanner.other : null,
      plan,
      phaseFailed,
      blocked,
      budgetSpent,
    };
  };

  const complete = completer(input, (count) => input.recorder.tokens(count));
  /** The turn cut by `signal`: what ends with it (a model call, a tool call) is no failure. */
  const killed = () => {
    log(`[looprun] killed: ${cutBy(input.signal.reason)}`);
    return done(null);
  };

  try {
    if (input.planning && plan === null) {
      const made = await makePlan(input, complete, null, null);
      if (!made.ok) {
        if (input.signal.aborted) return killed();
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
      // A tool call the signal cancelled has been answered: the turn ends here.
      if (input.signal.aborted) return killed();
      if (input.tokensLeft() <= 0) {
        log("stopped: the token budget is spent");
        budgetSpent = true;
        return done(1);
      }
      const res = await complete(messages, tools);
      const parsed = res.toolCalls.map((call) => ({
        call,
        args: parseToolArguments(call.arguments),
      }));
      // Unparseable arguments go back as "{}": the vendor may refuse a history that holds them.
      const sent = parsed.map(({ call, args }) => (args.ok ? call : { ...call, arguments: "{}" }));
      messages.push({ role: "assistant", content: res.content, toolCalls: sent });
      if (res.content) {
        log(res.content);
        said(res.content);
      }
      if (res.finishReason === "length") {
        // Cut at the output limit: its tool calls may be cut too, and it did not finish.
        log("stopped: the model's answer was cut at its length limit (finish_reason length)");
        return done(1);
      }
      if (res.toolCalls.length === 0) {
        log("(the model stopped calling tools)");
        return done(0);
      }
      for (const { call, args } of parsed) {
        const finishing =
          call.name === "finish" && args.ok ? FinishArgs.safeParse(args.value) : null;
        if (finishing?.success) {
          const { status, summary } = finishing.data;
          log(`finish (${status}): ${summary}`);
          said(summary);
          if (status === "blocked") blocked = summary.trim() || "(the agent gave no question)";
          return done(status === "done" ? 0 : 1);
        }
        let outcome: { isError: boolean; result: string };
        // A failed call of the agent's own tools is recorded and counted as the others are.
        const ownFailed = () =>
          input.recorder.toolCall({
            server: "",
            tool: call.name,
            // As every call's: the arguments as an object when they are JSON, else as given.
            args: args.ok ? args.value : call.arguments,
            ...outcome,
            durationMs: 0,
          });
        if ((!args.ok && AGENT_TOOLS.has(call.name)) || finishing?.success === false) {
          // A failed call like any other (recorded, counted), answered so the model can retry.
          const problem = args.ok ? finishProblem(finishing!.error!) : args.error;
          outcome = {
            isError: true,
            result: `${call.name}: ${problem} (${capHead(call.arguments, TRANSCRIPT_ARGS_BYTES)}); call ${call.name} again with ${args.ok ? `{"summary": "…", "status": "done" | "blocked"}` : "a JSON object"}`,
          };
          await ownFailed();
        } else if (call.name === "update_step" && plan && args.ok) {
          const updated = await updateStep(input, complete, plan, args.value);
          plan = updated.plan;
          outcome = updated.outcome;
          // A valid update is the plan's bookkeeping (its events); an invalid one a failed call.
          if (outcome.isError) await ownFailed();
        } else {
          // Unparseable arguments go to the hub as text: it reports them without calling.
          const given = args.ok ? args.value : call.arguments;
          const r = await input.toolSet.call(call.name, given, input.signal);
          await input.recorder.toolCall({
            server: r.server,
            tool: r.tool,
            args: given,
            isError: r.isError,
            result: r.result,
            durationMs: r.durationMs,
          });
          outcome = r;
        }
        calls += 1;
        logRedacted(
          `→ ${redact(call.name)}(${clip(call.arguments, TRANSCRIPT_ARGS_BYTES)}) ${outcome.isError ? "✗" : "✓"} ${clip(outcome.result, TRANSCRIPT_RESULT_BYTES)}`,
        );
        // Redacted as what is stored is: the model's vendor is no place for the secrets the
        // workers know (a command may print one it found, e.g. in the worker's environment).
        messages.push({
          role: "tool",
          toolCallId: call.id,
          name: call.name,
          content: forPrompt(redact(outcome.result)),
        });
        failuresInARow = outcome.isError ? failuresInARow + 1 : 0;
        if (failuresInARow >= MAX_CONSECUTIVE_TOOL_FAILURES) {
          logRedacted(
            `stopped: ${MAX_CONSECUTIVE_TOOL_FAILURES} tool calls in a row failed; the last: ${redact(call.name)}: ${clip(outcome.result, TRANSCRIPT_LAST_ERROR_BYTES)}`,
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
      if (input.signal.aborted) return killed();
      log(`the model could not be reached: ${error.message}`);
      return done(1);
    }
    throw error;
  }
}

/** Why a turn was cut, from its signal's reason (the engine's interruption, or the deadline's). */
export function cutBy(reason: unknown): string {
  if (reason instanceof Error && reason.name === "TimeoutError") {
    return "the run's time budget (maxMinutes) ran out";
  }
  if (reason === "stopped") return "the run was stopped";
  if (reason === "shutdown") return "the worker shut down (the iteration is handed back)";
  if (reason === "lease_lost") return "another worker took the run";
  return "the turn was cancelled";
}
