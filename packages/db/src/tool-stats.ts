import { and, count, desc, eq, gte, type SQL, sql } from "drizzle-orm";
import type { Db } from "./connection";
import { toolCalls } from "./schema";
import { dayWindow, toolErrorsInWindow, toolsInWindow } from "./stats-hourly";

export interface ToolStatsFilter {
  runId?: string;
  /** Epoch ms: only calls made at or after it. */
  since?: number;
}

export interface ToolStat {
  server: string;
  tool: string;
  calls: number;
  failures: number;
  successRate: number;
  meanDurationMs: number;
}

export interface ToolStats {
  totals: {
    calls: number;
    failures: number;
    successRate: number | null;
    meanDurationMs: number | null;
  };
  tools: ToolStat[];
  commonErrors: { server: string; tool: string; error: string; count: number }[];
}

export type ToolRows = {
  rows: { server: string; tool: string; calls: number; failures: number; mean: number }[];
  errors: ToolStats["commonErrors"];
};

/** Across runs: from the daily and hourly sums (stats-hourly.ts), not from every call. */
function inWindow(db: Db, since: number | undefined): ToolRows {
  const window = dayWindow(since);
  return {
    rows: toolsInWindow(db, window).map((r) => ({ ...r, mean: r.durationMs / r.calls })),
    errors: toolErrorsInWindow(db, window, 10),
  };
}

/** One run's calls (its primary key prefix). */
function ofRun(db: Db, filter: ToolStatsFilter): ToolRows {
  const where: SQL[] = [];
  if (filter.runId !== undefined) where.push(eq(toolCalls.runId, filter.runId));
  if (filter.since !== undefined) where.push(gte(toolCalls.createdAt, filter.since));
  const cond = and(...where);
  const failures = sql<number>`coalesce(sum(${toolCalls.isError}), 0)`;
  const mean = sql<number>`coalesce(avg(${toolCalls.durationMs}), 0)`;
  const rows = db
    .select({ server: toolCalls.server, tool: toolCalls.tool, calls: count(), failures, mean })
    .from(toolCalls)
    .where(cond)
    .groupBy(toolCalls.server, toolCalls.tool)
    // Ties in a fixed (byte) order, the same on every engine.
    .orderBy(desc(count()), toolCalls.server, toolCalls.tool)
    .all();
  const errorText = sql<string>`substr(${toolCalls.result}, 1, 200)`;
  const errors = db
    .select({ server: toolCalls.server, tool: toolCalls.tool, error: errorText, count: count() })
    .from(toolCalls)
    .where(and(cond, eq(toolCalls.isError, true)))
    .groupBy(toolCalls.server, toolCalls.tool, errorText)
    .orderBy(desc(count()), toolCalls.server, toolCalls.tool, errorText)
    .limit(10)
    .all();
  return { rows, errors };
}

/** Tool success rates, mean durations and the most common errors, for one run or all. */
export function toolStats(db: Db, filter: ToolStatsFilter): ToolStats {
  return foldToolStats(filter.runId === undefined ? inWindow(db, filter.since) : ofRun(db, filter));
}

/** The answer of `GET /api/stats/tools` (without the patterns) from per-tool rows. */
export function foldToolStats({ rows, errors }: ToolRows): ToolStats {
  const calls = rows.reduce((n, r) => n + r.calls, 0);
  const failed = rows.reduce((n, r) => n + Number(r.failures), 0);
  const totalMs = rows.reduce((n, r) => n + Number(r.mean) * r.calls, 0);
  const round = (x: number) => Math.round(x * 1000) / 1000;
  return {
    totals: {
      calls,
      failures: failed,
      successRate: calls === 0 ? null : round((calls - failed) / calls),
      meanDurationMs: calls === 0 ? null : Math.round(totalMs / calls),
    },
    tools: rows.map((r) => ({
      server: r.server,
      tool: r.tool,
      calls: r.calls,
      failures: Number(r.failures),
      successRate: round((r.calls - Number(r.failures)) / r.calls),
      meanDurationMs: Math.round(Number(r.mean)),
    })),
    commonErrors: errors,
  };
}
