import {
  ACTIVE_STATUSES,
  type AgentResult,
  type RunRecord,
  type ValidationResult,
} from "@looprun/core";
import { asc, count, eq, gt, gte, inArray, or, sql } from "drizzle-orm";
import type { Db } from "./connection";
import { toRunRecord } from "./records";
import { iterations, runs, toolCalls } from "./schema";

/**
 * The runs a live list must look at again: every active run, the runs in `ids` (active at the
 * last look, so their end is seen) and the runs created since `sinceId` (a ULID time floor),
 * which catches a run that was created and finished between two looks. All three are indexed.
 */
export function liveRuns(db: Db, ids: readonly string[], sinceId: string): RunRecord[] {
  const conditions = [inArray(runs.status, [...ACTIVE_STATUSES]), gte(runs.id, sinceId)];
  if (ids.length > 0) conditions.push(inArray(runs.id, [...ids]));
  return db
    .select()
    .from(runs)
    .where(or(...conditions))
    .all()
    .map(toRunRecord);
}

export function runCountsByStatus(db: Db): { status: string; count: number }[] {
  return db.select({ status: runs.status, count: count() }).from(runs).groupBy(runs.status).all();
}

export function tokenTotal(db: Db): number {
  const row = db
    .select({ tokens: sql<number>`coalesce(sum(json_extract(${runs.metrics}, '$.tokens')), 0)` })
    .from(runs)
    .get();
  return Number(row?.tokens ?? 0);
}

/** An iteration row seen by the metrics, with its SQLite rowid (rows only ever get appended). */
export interface IterationSample {
  rowid: number;
  status: string;
  outcome: string | null;
  agent: AgentResult | null;
  validation: ValidationResult[];
  startedAt: number;
  finishedAt: number | null;
  runStatus: string;
}

/** Iterations with a rowid above `afterRowid`, oldest first, with the status of their run. */
export function iterationsAfter(db: Db, afterRowid: number, limit: number): IterationSample[] {
  const rowid = sql<number>`${iterations}.rowid`;
  return db
    .select({
      rowid,
      status: iterations.status,
      outcome: iterations.outcome,
      agent: iterations.agent,
      validation: iterations.validation,
      startedAt: iterations.startedAt,
      finishedAt: iterations.finishedAt,
      runStatus: runs.status,
    })
    .from(iterations)
    .innerJoin(runs, eq(runs.id, iterations.runId))
    .where(gt(rowid, afterRowid))
    .orderBy(asc(rowid))
    .limit(limit)
    .all();
}

/**
 * Tool calls above `afterRowid`, counted per server and tool. Tool calls are immutable and
 * appended by serialised writers, so a reader's snapshot holds every row up to its largest rowid.
 */
export function toolCallsAfter(
  db: Db,
  afterRowid: number,
): {
  lastRowid: number;
  counts: { server: string; tool: string; calls: number; failures: number }[];
} {
  const rowid = sql<number>`${toolCalls}.rowid`;
  const rows = db
    .select({
      server: toolCalls.server,
      tool: toolCalls.tool,
      calls: count(),
      failures: sql<number>`coalesce(sum(${toolCalls.isError}), 0)`,
      lastRowid: sql<number>`max(${toolCalls}.rowid)`,
    })
    .from(toolCalls)
    .where(gt(rowid, afterRowid))
    .groupBy(toolCalls.server, toolCalls.tool)
    .all();
  const lastRowid = rows.reduce((max, r) => Math.max(max, Number(r.lastRowid)), afterRowid);
  return {
    lastRowid,
    counts: rows.map((r) => ({
      server: r.server,
      tool: r.tool,
      calls: r.calls,
      failures: Number(r.failures),
    })),
  };
}
