import type { RunReason, RunStatus } from "../domain/run";
import { assertNever } from "../util/assert-never";
import type { Interruption } from "./interruptions";
import type { RunContext } from "./run-context";

export type StepResult =
  | { kind: "finished"; status: RunStatus; reason: RunReason | null }
  | { kind: "cooldown"; until: number }
  /** The run waits for a person (`awaiting_approval`): its job ends, no worker slot is held. */
  | { kind: "awaiting_approval" }
  | { kind: "handed_back" }
  /** The database is unreachable for now: the run is left as it is, to try again at `until`. */
  | { kind: "store_unavailable"; until: number }
  | { kind: "lease_lost" }
  | { kind: "missing" };

export const BUDGET_SUMMARY = "failed_budget_exhausted";

export function finished(ctx: RunContext): StepResult {
  return { kind: "finished", status: ctx.run.status, reason: ctx.run.reason };
}

/**
 * Ends a step interrupted outside an iteration (a preparation phase, a wait for approval): the
 * run is handed back, stopped, or out of time; a lost lease leaves it to the worker that has it.
 */
export async function interruptedStep(ctx: RunContext, why: Interruption): Promise<StepResult> {
  switch (why) {
    case "lease_lost":
      return { kind: "lease_lost" };
    case "shutdown":
      await ctx.commit({ activePgid: null, progress: "handed back: the worker is shutting down" });
      return { kind: "handed_back" };
    case "stopped":
      await ctx.finish("stopped", "stopped", "stopped by request");
      return finished(ctx);
    case "deadline":
      await ctx.finish("failed", "max_minutes", BUDGET_SUMMARY, {
        events: [["budget_exhausted", { reason: "max_minutes" }, "max_minutes"]],
      });
      return finished(ctx);
    default:
      return assertNever(why);
  }
}
