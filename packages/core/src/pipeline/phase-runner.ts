import { runCommandAgent } from "../agents/command-agent";
import type { PreparationPhase } from "../domain/artifacts";
import type { AgentSpec } from "../domain/run-spec";
import type { ChatModel } from "../llm/chat-model";
import { askForText } from "../review/llm-ask";
import { timeoutSignal } from "../util/timeout-signal";

export interface PhaseRunInput {
  agent: AgentSpec;
  phase: PreparationPhase;
  prompt: string;
  workspace: string;
  env: Record<string, string>;
  /** Time left before the run's deadline. */
  timeoutMs: number;
  outputCapBytes: number;
  signal: AbortSignal;
  onSpawn?: (pgid: number) => void;
  /** For the mistral agent. */
  llm?: ChatModel;
  model: string;
  onTokens: (count: number) => Promise<void>;
}

export type PhaseRunResult =
  | { ok: true; content: string; durationMs: number }
  | { ok: false; error: string; durationMs: number };

const SYSTEM =
  "You are a senior software engineer preparing a change before it is implemented. Answer the phase's question in Markdown; do not write the implementation.";

/**
 * Runs one preparation phase with the run's agent: the command agent runs its command with
 * the phase prompt (stdin and `$LOOPRUN_PROMPT_FILE`, `LOOPRUN_PHASE` set) and its output is
 * the artifact; the mistral agent answers in one LLM call. A failure or an empty answer is an
 * error.
 */
export async function runPreparationPhase(input: PhaseRunInput): Promise<PhaseRunResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const agent = input.agent;
  if (agent.type === "command") {
    const r = await runCommandAgent({
      spec: agent,
      prompt: input.prompt,
      workspace: input.workspace,
      env: { ...input.env, LOOPRUN_PHASE: input.phase },
      budgetMs: input.timeoutMs,
      outputCapBytes: input.outputCapBytes,
      signal: input.signal,
      ...(input.onSpawn ? { onSpawn: input.onSpawn } : {}),
    });
    if (r.exitCode !== 0) {
      return {
        ok: false,
        error: `the agent exited ${r.exitCode ?? "on a signal"}: ${r.output.trim().slice(-1000)}`,
        durationMs: r.durationMs,
      };
    }
    if (r.output.trim().length === 0)
      return { ok: false, error: "the agent printed nothing", durationMs: r.durationMs };
    return { ok: true, content: r.output, durationMs: r.durationMs };
  }
  if (!input.llm) {
    return {
      ok: false,
      error: "no LLM is configured: set MISTRAL_API_KEY for the workers",
      durationMs: 0,
    };
  }
  const timed = timeoutSignal(input.signal, Math.max(1, input.timeoutMs));
  const answer = await askForText(
    { llm: input.llm, model: input.model, signal: timed.signal, onTokens: input.onTokens },
    [
      { role: "system", content: SYSTEM },
      { role: "user", content: input.prompt },
    ],
  ).finally(() => timed.clear());
  return answer.ok
    ? { ok: true, content: answer.value, durationMs: elapsed() }
    : { ok: false, error: answer.error, durationMs: elapsed() };
}
