import { and, desc, eq, gte, type SQL, type SQLWrapper, sql } from "drizzle-orm";
import {
  type ConvergenceStats,
  type ConvergenceStatsFilter,
  foldConvergence,
} from "../convergence-stats";
import { dayWindow } from "../stats-hourly";
import { foldToolStats, type ToolRows, type ToolStats, type ToolStatsFilter } from "../tool-stats";
import type { PgDb } from "./connection";
import { toolCalls } from "./schema";
import {
  iterationsByOutcome,
  runsByStatus,
  toolErrorsInWindow,
  toolsInWindow,
} from "./stats-hourly";

/** ../convergence-stats.ts on PostgreSQL: the same sums, folded by the same code. */
export async function convergenceStats(
  db: PgDb,
  filter: ConvergenceStatsFilter,
): Promise<ConvergenceStats> {
  const window = dayWindow(filter.since, filter.until);
  const [runRows, iterationRows] = await Promise.all([
    runsByStatus(db, window),
    iterationsByOutcome(db, window),
  ]);
  return foldConvergence(runRows, iterationRows);
}

/** Across runs: from the daily and hourly sums (stats-hourly.ts). */
async function inWindow(db: PgDb, since: number | undefined): Promise<ToolRows> {
  const window = dayWindow(since);
  const [rows, errors] = await Promise.all([
    toolsInWindow(db, window),
    toolErrorsInWindow(db, window, 10),
  ]);
  return { rows: rows.map((r) => ({ ...r, mean: r.durationMs / r.calls })), errors };
}

const byteOrder = (column: SQLWrapper) => sql`${column} collate "C"`;

/** One run's calls (its primary key prefix), ordered as ../tool-stats.ts orders them. */
async function ofRun(db: PgDb, filter: ToolStatsFilter): Promise<ToolRows> {
  const where: SQL[] = [];
  if (filter.runId !== undefined) where.push(eq(toolCalls.runId, filter.runId));
  if (filter.since !== undefined) where.push(gte(toolCalls.createdAt, filter.since));
  const cond = and(...where);
  const calls = sql<number>`count(*)::float8`;
  const failures = sql<number>`(count(*) filter (where ${toolCalls.isError}))::float8`;
  const mean = sql<number>`coalesce(avg(${toolCalls.durationMs}), 0)::float8`;
  const rows = await db
    .select({ server: toolCalls.server, tool: toolCalls.tool, calls, failures, mean })
    .from(toolCalls)
    .where(cond)
    .groupBy(toolCalls.server, toolCalls.tool)
    .orderBy(desc(calls), byteOrder(toolCalls.server), byteOrder(toolCalls.tool));
  const errorText = sql<string>`substr(${toolCalls.result}, 1, 200)`;
  const errors = await db
    .select({ server: toolCalls.server, tool: toolCalls.tool, error: errorText, count: calls })
    .from(toolCalls)
    .where(and(cond, eq(toolCalls.isError, true)))
    .groupBy(toolCalls.server, toolCalls.tool, errorText)
    .orderBy(
      desc(calls),
      byteOrder(toolCalls.server),
      byteOrder(toolCalls.tool),
      byteOrder(errorText),
    )
    .limit(10);
  return { rows, errors };
}

/** ../tool-stats.ts on PostgreSQL. */
export async function toolStats(db: PgDb, filter: ToolStatsFilter): Promise<ToolStats> {
  return foldToolStats(
    filter.runId === undefined ? await inWindow(db, filter.since) : await ofRun(db, filter),
  );
}
