import { RUN_STATUSES, type RunStatus } from "@looprun/core";
import type { Db } from "./connection";
import {
  dayWindow,
  type IterationsByOutcomeRow,
  iterationsByOutcome,
  type RunsByStatusRow,
  runsByStatus,
} from "./stats-hourly";

export interface ConvergenceStatsFilter {
  /** Epoch ms, inclusive: runs created at or after it. */
  since?: number;
  /** Epoch ms, exclusive: runs created before it. */
  until?: number;
}

export interface ConvergenceStats {
  runs: { total: number; byStatus: Record<RunStatus, number> };
  /** succeeded / (succeeded + failed); stopped runs are left out. `null` without any. */
  successRate: number | null;
  /** Mean iterations of the succeeded runs. */
  meanIterationsToConverge: number | null;
  /** Mean time from start to finish of the succeeded runs. */
  meanTimeToConvergeMs: number | null;
  /** Mean duration of the decided iterations (passed or failed) of the runs. */
  meanIterationTimeMs: number | null;
  iterations: number;
  validationFailures: number;
  reviewBlockings: number;
  /** Reasons of the failed runs, most common first. */
  commonFailureReasons: { reason: string; count: number }[];
  /** Outcomes of the decided iterations, most common first. */
  iterationOutcomes: { outcome: string; count: number }[];
}

const round = (x: number | null, digits = 0) => {
  if (x === null || Number.isNaN(x)) return null;
  const f = 10 ** digits;
  return Math.round(x * f) / f;
};

/**
 * Convergence across the runs created in a time window, from the daily and hourly sums
 * (stats-hourly.ts): the same answers as aggregating every run and iteration, without reading
 * them all.
 */
export function convergenceStats(db: Db, filter: ConvergenceStatsFilter): ConvergenceStats {
  const window = dayWindow(filter.since, filter.until);
  return foldConvergence(runsByStatus(db, window), iterationsByOutcome(db, window));
}

/** The answer of `GET /api/stats` from the window's sums (either engine's). */
export function foldConvergence(
  runRows: readonly RunsByStatusRow[],
  iterationRows: readonly IterationsByOutcomeRow[],
): ConvergenceStats {
  const byStatus = Object.fromEntries(RUN_STATUSES.map((s) => [s, 0])) as Record<RunStatus, number>;
  let total = 0;
  let iterationsSum = 0;
  let validationFailures = 0;
  let reviewBlockings = 0;
  const converged = { iterations: 0, iterationsRuns: 0, durationMs: 0, durationRuns: 0 };
  const reasons = new Map<string, number>();
  for (const row of runRows) {
    byStatus[row.status as RunStatus] = (byStatus[row.status as RunStatus] ?? 0) + row.runs;
    total += row.runs;
    iterationsSum += row.iterations;
    validationFailures += row.validationFailures;
    reviewBlockings += row.reviewBlockings;
    if (row.status === "succeeded") {
      converged.iterations += row.iterations;
      converged.iterationsRuns += row.iterationsRuns;
      converged.durationMs += row.durationMs;
      converged.durationRuns += row.durationRuns;
    }
    if (row.status === "failed") {
      const reason = row.reason === "" ? "unknown" : row.reason;
      reasons.set(reason, (reasons.get(reason) ?? 0) + row.runs);
    }
  }
  let iterationMs = 0;
  let timed = 0;
  const outcomes = new Map<string, number>();
  for (const row of iterationRows) {
    iterationMs += row.durationMs;
    timed += row.timed;
    const outcome = row.outcome === "" ? "unknown" : row.outcome;
    outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + row.iterations);
  }
  const mean = (sum: number, n: number) => (n === 0 ? null : sum / n);

  const decided = byStatus.succeeded + byStatus.failed;
  return {
    runs: { total, byStatus },
    successRate: decided === 0 ? null : round(byStatus.succeeded / decided, 3),
    meanIterationsToConverge: round(mean(converged.iterations, converged.iterationsRuns), 2),
    meanTimeToConvergeMs: round(mean(converged.durationMs, converged.durationRuns)),
    meanIterationTimeMs: round(mean(iterationMs, timed)),
    iterations: iterationsSum,
    validationFailures,
    reviewBlockings,
    commonFailureReasons: mostCommon(reasons, "reason").slice(0, 10),
    iterationOutcomes: mostCommon(outcomes, "outcome"),
  };
}

function mostCommon<K extends string>(
  counts: Map<string, number>,
  key: K,
): ({ [P in K]: string } & { count: number })[] {
  return [...counts]
    .sort(([a, x], [b, y]) => y - x || (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, count]) => ({ [key]: name, count }) as { [P in K]: string } & { count: number });
}
