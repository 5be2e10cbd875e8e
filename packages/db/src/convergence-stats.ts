import { RUN_STATUSES, type RunStatus } from "@looprun/core";
import { and, count, desc, eq, gte, inArray, isNotNull, lt, type SQL, sql } from "drizzle-orm";
import type { Db } from "./connection";
import { iterations, runs } from "./schema";

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

/** Convergence across the runs created in a time window. */
export function convergenceStats(db: Db, filter: ConvergenceStatsFilter): ConvergenceStats {
  const where: SQL[] = [];
  if (filter.since !== undefined) where.push(gte(runs.createdAt, filter.since));
  if (filter.until !== undefined) where.push(lt(runs.createdAt, filter.until));
  const inWindow = and(...where);
  const metric = (name: string) => sql<number>`json_extract(${runs.metrics}, ${`$.${name}`})`;

  const byStatus = Object.fromEntries(RUN_STATUSES.map((s) => [s, 0])) as Record<RunStatus, number>;
  const statusRows = db
    .select({ status: runs.status, n: count() })
    .from(runs)
    .where(inWindow)
    .groupBy(runs.status)
    .all();
  for (const row of statusRows) byStatus[row.status as RunStatus] = row.n;
  const total = statusRows.reduce((sum, r) => sum + r.n, 0);

  const totals = db
    .select({
      iterations: sql<number>`coalesce(sum(${metric("iterations")}), 0)`,
      validationFailures: sql<number>`coalesce(sum(${metric("validationFailures")}), 0)`,
      reviewBlockings: sql<number>`coalesce(sum(${metric("reviewBlockings")}), 0)`,
    })
    .from(runs)
    .where(inWindow)
    .get();
  const converged = db
    .select({
      iterations: sql<number | null>`avg(${metric("iterations")})`,
      timeMs: sql<number | null>`avg(${runs.finishedAt} - ${runs.startedAt})`,
    })
    .from(runs)
    .where(and(inWindow, eq(runs.status, "succeeded")))
    .get();
  const iterationTime = db
    .select({ ms: sql<number | null>`avg(${iterations.finishedAt} - ${iterations.startedAt})` })
    .from(iterations)
    .innerJoin(runs, eq(runs.id, iterations.runId))
    .where(
      and(
        inWindow,
        inArray(iterations.status, ["passed", "failed"]),
        isNotNull(iterations.finishedAt),
      ),
    )
    .get();
  const reasons = db
    .select({ reason: sql<string>`coalesce(${runs.reason}, 'unknown')`, count: count() })
    .from(runs)
    .where(and(inWindow, eq(runs.status, "failed")))
    .groupBy(runs.reason)
    .orderBy(desc(count()))
    .limit(10)
    .all();
  const outcomes = db
    .select({ outcome: sql<string>`coalesce(${iterations.outcome}, 'unknown')`, count: count() })
    .from(iterations)
    .innerJoin(runs, eq(runs.id, iterations.runId))
    .where(and(inWindow, inArray(iterations.status, ["passed", "failed"])))
    .groupBy(iterations.outcome)
    .orderBy(desc(count()))
    .all();

  const decided = byStatus.succeeded + byStatus.failed;
  return {
    runs: { total, byStatus },
    successRate: decided === 0 ? null : round(byStatus.succeeded / decided, 3),
    meanIterationsToConverge: round(converged?.iterations ?? null, 2),
    meanTimeToConvergeMs: round(converged?.timeMs ?? null),
    meanIterationTimeMs: round(iterationTime?.ms ?? null),
    iterations: Number(totals?.iterations ?? 0),
    validationFailures: Number(totals?.validationFailures ?? 0),
    reviewBlockings: Number(totals?.reviewBlockings ?? 0),
    commonFailureReasons: reasons,
    iterationOutcomes: outcomes,
  };
}
