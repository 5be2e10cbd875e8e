import { isWaiting } from "../domain/approval";
import type { BudgetSnapshot } from "../domain/events";
import type { BudgetReason, RunRecord } from "../domain/run";

export type BudgetCheck = { kind: "ok" } | { kind: "exhausted"; reason: BudgetReason };

export interface RunBudgetView {
  maxIterations: number;
  maxMinutes: number;
  elapsedMs: number;
  remainingIterations: number;
  deadlineAt: number | null;
  /** Time spent waiting for a person (answered waits and the one in progress): not counted. */
  pausedMs: number;
}

/**
 * Time counts from `startedAt`, less the time spent waiting for a person (answered waits in
 * `pausedMs`, and the wait in progress); iterations count the finished ones.
 */
export function budgetView(run: RunRecord, now: number): RunBudgetView {
  const end = run.finishedAt ?? now;
  const waiting = isWaiting(run.approval) ? Math.max(0, end - run.approval.requestedAt) : 0;
  return {
    maxIterations: run.spec.maxIterations,
    maxMinutes: run.spec.maxMinutes,
    elapsedMs:
      run.startedAt === null ? 0 : Math.max(0, end - run.startedAt - run.pausedMs - waiting),
    remainingIterations: Math.max(0, run.spec.maxIterations - run.metrics.iterations),
    deadlineAt: run.deadlineAt,
    pausedMs: run.pausedMs + waiting,
  };
}

export function budgetSnapshot(run: RunRecord, now: number, reason?: string): BudgetSnapshot {
  const view = budgetView(run, now);
  return {
    elapsedMs: view.elapsedMs,
    remainingIterations: view.remainingIterations,
    ...(reason === undefined ? {} : { reason }),
  };
}

export function deadlineFor(startedAt: number, maxMinutes: number): number {
  return startedAt + Math.round(maxMinutes * 60_000);
}

/** Tokens the run may still spend (Infinity without a token budget; 0 or less: spent). */
export function tokensLeft(run: RunRecord): number {
  return run.spec.maxTokens === null
    ? Number.POSITIVE_INFINITY
    : run.spec.maxTokens - run.metrics.tokens;
}

/**
 * Whether another iteration may start at `at` (pass `now + cooldown` to ask before
 * waiting a cooldown: a budget that will be gone by then ends the run at once).
 */
export function checkBudget(run: RunRecord, at: number): BudgetCheck {
  if (run.metrics.iterations >= run.spec.maxIterations) {
    return { kind: "exhausted", reason: "max_iterations" };
  }
  if (run.deadlineAt !== null && at >= run.deadlineAt) {
    return { kind: "exhausted", reason: "max_minutes" };
  }
  if (tokensLeft(run) <= 0) {
    return { kind: "exhausted", reason: "max_tokens" };
  }
  return { kind: "ok" };
}
