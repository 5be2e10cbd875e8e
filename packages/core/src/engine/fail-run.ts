import { isTerminal } from "../domain/run";
import type { EngineResources } from "./resources";
import { RunContext } from "./run-context";

/**
 * Ends a run as `failed` / `error` from outside its step (its job kept failing): claims it,
 * so that any earlier holder is fenced off, then finishes it, which kills what a crashed holder
 * left running (its job fails for good when it stalled too often: workers killed mid-command).
 */
export async function failRun(res: EngineResources, runId: string, message: string): Promise<void> {
  const claimed = await res.store.claimRun(runId);
  if (claimed === null || isTerminal(claimed.run.status)) return;
  const { run } = claimed;
  const ctx = new RunContext(res, run, run.epoch, claimed.lastIteration, claimed.lastDecided);
  // The attempt in flight was cut short (its worker died, or its step kept failing): abandoned,
  // as a resumed run marks such an attempt, not an iteration that ran to a decision.
  await ctx.finish("failed", "error", ctx.redact(`error: ${message}`).slice(0, 2000), {
    iteration: { status: "abandoned", outcome: "error" },
  });
}
