import { ACTIVE_STATUSES } from "@looprun/core";
import {
  type DayWindow,
  type IterationsByOutcomeRow,
  type RunsByStatusRow,
  type SumsTable,
  sumsUnion,
  type ToolErrorRow,
  type ToolRow,
} from "../stats-hourly";
import { type PgDb, poolOf } from "./connection";

/**
 * ../stats-hourly.ts on PostgreSQL: whole days from the daily sums, whole hours around them from
 * the hourly ones, the edges of the window from the rows. The sums hold the finished runs only
 * (drizzle-pg/0002): the runs still active in the hours the sums cover — few, found through the
 * partial index of active runs — are read from their rows as well. Sums come back as float8
 * (JavaScript numbers, exact below 2^53); text is ordered byte-wise (`COLLATE "C"`), as SQLite
 * orders it, whatever the database's locale.
 *
 * Parameters: $1 s1, $2 s2 (the whole hours the sums cover), $3 a1, $4 b1, $5 a2, $6 b2 (edges,
 * epoch ms), $7 d1, $8 d2 (whole days), $9 h1, $10 h2, $11 h3, $12 h4 (whole hours around them).
 */

const ACTIVE = `(${ACTIVE_STATUSES.map((s) => `'${s}'`).join(", ")})`;
const IN_WHOLE_HOURS = (column: string) =>
  `${column} / 3600000 >= $1::int8 and ${column} / 3600000 < $2::int8`;

/** The daily and hourly sums of `table` in the window: bounds $7 to $12 (`params` below). */
const PARAMS = { d1: 7, d2: 8, h1: 9, h2: 10, h3: 11, h4: 12 } as const;
const sums = (table: SumsTable, columns: string) =>
  sumsUnion(table, columns, (b) => `$${PARAMS[b]}::int8`);

function runRow(where: string): string {
  const m = (key: string) => `(metrics ->> '${key}')`;
  return `select status, coalesce(reason, '') as reason, 1 as runs,
    coalesce(${m("iterations")}::int8, 0) as iterations,
    (${m("iterations")} is not null)::int as iterations_runs,
    coalesce(${m("validationFailures")}::int8, 0) as validation_failures,
    coalesce(${m("reviewBlockings")}::int8, 0) as review_blockings,
    coalesce(finished_at - started_at, 0) as duration_ms,
    ((finished_at - started_at) is not null)::int as duration_runs
  from runs where ${where}`;
}

const RUNS_BY_STATUS = `
select status, reason, sum(runs)::float8 as runs, sum(iterations)::float8 as "iterations",
  sum(iterations_runs)::float8 as "iterationsRuns",
  sum(validation_failures)::float8 as "validationFailures",
  sum(review_blockings)::float8 as "reviewBlockings", sum(duration_ms)::float8 as "durationMs",
  sum(duration_runs)::float8 as "durationRuns"
from (
  ${sums(
    "run",
    "status, reason, runs, iterations, iterations_runs, validation_failures, review_blockings, duration_ms, duration_runs",
  )}
  union all ${runRow(`status in ${ACTIVE} and ${IN_WHOLE_HOURS("created_at")}`)}
  union all ${runRow("created_at >= $3::int8 and created_at < $4::int8")}
  union all ${runRow("created_at >= $5::int8 and created_at < $6::int8")}
) t
group by status, reason having sum(runs) > 0`;

function iterationRow(where: string): string {
  return `select coalesce(i.outcome, '') as outcome, 1 as iterations,
    coalesce(i.finished_at - i.started_at, 0) as duration_ms, (i.finished_at is not null)::int as timed
  from runs r join iterations i on i.run_id = r.id
  where ${where} and i.status in ('passed', 'failed')`;
}

const ITERATIONS_BY_OUTCOME = `
select outcome, sum(iterations)::float8 as iterations, sum(duration_ms)::float8 as "durationMs",
  sum(timed)::float8 as timed
from (
  ${sums("iteration", "outcome, iterations, duration_ms, timed")}
  union all ${iterationRow(`r.status in ${ACTIVE} and ${IN_WHOLE_HOURS("r.created_at")}`)}
  union all ${iterationRow("r.created_at >= $3::int8 and r.created_at < $4::int8")}
  union all ${iterationRow("r.created_at >= $5::int8 and r.created_at < $6::int8")}
) t
group by outcome having sum(iterations) > 0`;

/** Tool calls of active runs made in the whole hours. */
const ACTIVE_CALLS = `tool_calls t join runs r on r.id = t.run_id
  where r.status in ${ACTIVE} and ${IN_WHOLE_HOURS("t.created_at")}`;

const TOOLS = `
select server, tool, sum(calls)::float8 as calls, sum(failures)::float8 as failures,
  sum(duration_ms)::float8 as "durationMs"
from (
  ${sums("tool", "server, tool, calls, failures, duration_ms")}
  union all select t.server, t.tool, 1, t.is_error::int, t.duration_ms from ${ACTIVE_CALLS}
  union all select server, tool, 1, is_error::int, duration_ms
    from tool_calls where created_at >= $3::int8 and created_at < $4::int8
  union all select server, tool, 1, is_error::int, duration_ms
    from tool_calls where created_at >= $5::int8 and created_at < $6::int8
) t
group by server, tool having sum(calls) > 0
order by calls desc, server collate "C", tool collate "C"`;

const TOOL_ERRORS = `
select server, tool, error, sum(n)::float8 as count
from (
  ${sums("tool_errors", "server, tool, error, count as n")}
  union all select t.server, t.tool, substr(t.result, 1, 200), 1
    from ${ACTIVE_CALLS} and t.is_error
  union all select server, tool, substr(result, 1, 200), 1
    from tool_calls where is_error and created_at >= $3::int8 and created_at < $4::int8
  union all select server, tool, substr(result, 1, 200), 1
    from tool_calls where is_error and created_at >= $5::int8 and created_at < $6::int8
) t
group by server, tool, error having sum(n) > 0
order by count desc, server collate "C", tool collate "C", error collate "C"
limit $13`;

const params = (w: DayWindow) => [
  w.s1,
  w.s2,
  w.a1,
  w.b1,
  w.a2,
  w.b2,
  w.d1,
  w.d2,
  w.h1,
  w.h2,
  w.h3,
  w.h4,
];

/** Named statements: each connection of the pool parses and plans them once. */
async function query<T>(db: PgDb, name: string, text: string, values: unknown[]): Promise<T[]> {
  return (await poolOf(db).query({ name, text, values })).rows as T[];
}

/** Runs created in the window, by status and reason. */
export function runsByStatus(db: PgDb, w: DayWindow): Promise<RunsByStatusRow[]> {
  return query(db, "looprun_runs_by_status", RUNS_BY_STATUS, params(w));
}

/** Decided iterations of the runs created in the window, by outcome. */
export function iterationsByOutcome(db: PgDb, w: DayWindow): Promise<IterationsByOutcomeRow[]> {
  return query(db, "looprun_iterations_by_outcome", ITERATIONS_BY_OUTCOME, params(w));
}

/** Tool calls made in the window, by server and tool, most called first. */
export function toolsInWindow(db: PgDb, w: DayWindow): Promise<ToolRow[]> {
  return query(db, "looprun_tools_in_window", TOOLS, params(w));
}

/** The most common errors of the tool calls made in the window. */
export function toolErrorsInWindow(db: PgDb, w: DayWindow, limit: number): Promise<ToolErrorRow[]> {
  return query(db, "looprun_tool_errors_in_window", TOOL_ERRORS, [...params(w), limit]);
}
