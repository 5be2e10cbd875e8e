import type { RunReason, RunStatus } from "../domain/run";
import type { RunContext } from "./run-context";

export type StepResult =
  | { kind: "finished"; status: RunStatus; reason: RunReason | null }
  | { kind: "cooldown"; until: number }
  /** The run waits for a person (`awaiting_approval`): its job ends, no worker slot is held. */
  | { kind: "awaiting_approval" }
  | { kind: "handed_back" }
  | { kind: "lease_lost" }
  | { kind: "missing" };

export const BUDGET_SUMMARY = "failed_budget_exhausted";

export function finished(ctx: RunContext): StepResult {
  return { kind: "finished", status: ctx.run.status, reason: ctx.run.reason };
}
