import type BetterSqlite3 from "better-sqlite3";
import type { Db } from "./connection";

/**
 * Statistics over a time window from the sums that triggers keep (schema.ts, `*_stats_hourly`
 * and `*_stats_daily`): whole days inside the window come from the daily sums, whole hours
 * around them (fewer than a day at each end) from the hourly ones, the rest of the window (at
 * most an hour at each end) from the rows themselves, all in one statement. The answers are
 * those of aggregating the rows directly, at a cost that grows with the number of days instead
 * of the number of runs.
 */

export const HOUR_MS = 3_600_000;
const MIN = Number.MIN_SAFE_INTEGER;
const MAX = Number.MAX_SAFE_INTEGER;

/** Bind parameters: `[h1, h2)` whole hours, `[a1, b1)` and `[a2, b2)` the rows at the edges. */
export interface HourWindow {
  h1: number;
  h2: number;
  a1: number;
  b1: number;
  a2: number;
  b2: number;
}

/** Splits `[since, until)` (epoch ms, either end open) into whole hours and two edges. */
export function hourWindow(since?: number, until?: number): HourWindow {
  const h1 = since === undefined ? MIN : Math.ceil(since / HOUR_MS);
  const h2 = until === undefined ? MAX : Math.floor(until / HOUR_MS);
  if (h1 >= h2) return { h1: 0, h2: 0, a1: since ?? MIN, b1: until ?? MAX, a2: 0, b2: 0 };
  return {
    h1,
    h2,
    a1: since ?? 0,
    b1: since === undefined ? 0 : h1 * HOUR_MS,
    a2: until === undefined ? 0 : h2 * HOUR_MS,
    b2: until ?? 0,
  };
}

/**
 * Bind parameters: `[d1, d2)` whole days, `[h1, h2)` and `[h3, h4)` the whole hours before and
 * after them, `[a1, b1)` and `[a2, b2)` the rows at the edges; `[s1, s2)` all the whole hours
 * the sums cover (the days and the hours around them), for PostgreSQL's active runs.
 */
export interface DayWindow extends HourWindow {
  d1: number;
  d2: number;
  h3: number;
  h4: number;
  s1: number;
  s2: number;
}

/** Splits `[since, until)` (epoch ms, either end open) into whole days, hours and two edges. */
export function dayWindow(since?: number, until?: number): DayWindow {
  const w = hourWindow(since, until);
  const none = { d1: 0, d2: 0, h3: 0, h4: 0, s1: w.h1, s2: w.h2 };
  if (w.h1 >= w.h2) return { ...w, ...none };
  const d1 = since === undefined ? MIN : Math.ceil(w.h1 / 24);
  const d2 = until === undefined ? MAX : Math.floor(w.h2 / 24);
  if (d1 >= d2) return { ...w, ...none };
  return {
    ...w,
    s1: w.h1,
    s2: w.h2,
    d1,
    d2,
    h1: since === undefined ? 0 : w.h1,
    h2: since === undefined ? 0 : d1 * 24,
    h3: until === undefined ? 0 : d2 * 24,
    h4: until === undefined ? 0 : w.h2,
  };
}

/** The daily and hourly tables of the sums of runs, iterations, tool calls and tool errors. */
export type SumsTable = "run" | "iteration" | "tool" | "tool_errors";

/**
 * The sums of a table's whole days and of the whole hours around them, as one union; `p` writes
 * a window bound (`d1`, `d2`, `h1`…`h4`) as the engine's placeholder.
 */
export function sumsUnion(
  table: SumsTable,
  columns: string,
  p: (bound: "d1" | "d2" | "h1" | "h2" | "h3" | "h4") => string,
): string {
  const [daily, hourly] =
    table === "tool_errors"
      ? ["tool_errors_daily", "tool_errors_hourly"]
      : [`${table}_stats_daily`, `${table}_stats_hourly`];
  return `select ${columns} from ${daily} where day >= ${p("d1")} and day < ${p("d2")}
  union all select ${columns} from ${hourly} where hour >= ${p("h1")} and hour < ${p("h2")}
  union all select ${columns} from ${hourly} where hour >= ${p("h3")} and hour < ${p("h4")}`;
}

/** SQLite's statements bind the window by name. */
const sums = (table: SumsTable, columns: string) => sumsUnion(table, columns, (b) => `:${b}`);

const RUNS_BY_STATUS = `
select status, reason, sum(runs) as runs, sum(iterations) as iterations,
  sum(iterations_runs) as iterationsRuns, sum(validation_failures) as validationFailures,
  sum(review_blockings) as reviewBlockings, sum(duration_ms) as durationMs,
  sum(duration_runs) as durationRuns
from (
  ${sums(
    "run",
    "status, reason, runs, iterations, iterations_runs, validation_failures, review_blockings, duration_ms, duration_runs",
  )}
  union all ${edgeRuns("a1", "b1")}
  union all ${edgeRuns("a2", "b2")}
)
group by status, reason having sum(runs) > 0`;

function edgeRuns(from: string, to: string): string {
  const m = (key: string) => `json_extract(metrics, '$.${key}')`;
  return `select status, coalesce(reason, ''), 1, coalesce(${m("iterations")}, 0),
    ${m("iterations")} is not null, coalesce(${m("validationFailures")}, 0),
    coalesce(${m("reviewBlockings")}, 0), coalesce(finished_at - started_at, 0),
    finished_at - started_at is not null
  from runs where created_at >= :${from} and created_at < :${to}`;
}

const ITERATIONS_BY_OUTCOME = `
select outcome, sum(iterations) as iterations, sum(duration_ms) as durationMs, sum(timed) as timed
from (
  ${sums("iteration", "outcome, iterations, duration_ms, timed")}
  union all ${edgeIterations("a1", "b1")}
  union all ${edgeIterations("a2", "b2")}
)
group by outcome having sum(iterations) > 0`;

function edgeIterations(from: string, to: string): string {
  return `select coalesce(i.outcome, ''), 1, coalesce(i.finished_at - i.started_at, 0),
    i.finished_at is not null
  from runs r join iterations i on i.run_id = r.id
  where r.created_at >= :${from} and r.created_at < :${to} and i.status in ('passed', 'failed')`;
}

const TOOLS = `
select server, tool, sum(calls) as calls, sum(failures) as failures, sum(duration_ms) as durationMs
from (
  ${sums("tool", "server, tool, calls, failures, duration_ms")}
  union all select server, tool, 1, is_error, duration_ms
    from tool_calls where created_at >= :a1 and created_at < :b1
  union all select server, tool, 1, is_error, duration_ms
    from tool_calls where created_at >= :a2 and created_at < :b2
)
group by server, tool having sum(calls) > 0
order by calls desc, server, tool`;

const TOOL_ERRORS = `
select server, tool, error, sum(n) as count
from (
  ${sums("tool_errors", "server, tool, error, count as n")}
  union all select server, tool, substr(result, 1, 200), 1
    from tool_calls where is_error = 1 and created_at >= :a1 and created_at < :b1
  union all select server, tool, substr(result, 1, 200), 1
    from tool_calls where is_error = 1 and created_at >= :a2 and created_at < :b2
)
group by server, tool, error having sum(n) > 0
order by count desc, server, tool, error
limit :limit`;

export interface RunsByStatusRow {
  status: string;
  /** `""` for none. */
  reason: string;
  runs: number;
  iterations: number;
  iterationsRuns: number;
  validationFailures: number;
  reviewBlockings: number;
  durationMs: number;
  durationRuns: number;
}

export interface IterationsByOutcomeRow {
  /** `""` for none. */
  outcome: string;
  iterations: number;
  durationMs: number;
  timed: number;
}

export interface ToolRow {
  server: string;
  tool: string;
  calls: number;
  failures: number;
  durationMs: number;
}

export interface ToolErrorRow {
  server: string;
  tool: string;
  error: string;
  count: number;
}

interface Statements {
  runsByStatus: BetterSqlite3.Statement<[DayWindow], RunsByStatusRow>;
  iterationsByOutcome: BetterSqlite3.Statement<[DayWindow], IterationsByOutcomeRow>;
  tools: BetterSqlite3.Statement<[DayWindow], ToolRow>;
  toolErrors: BetterSqlite3.Statement<[DayWindow & { limit: number }], ToolErrorRow>;
}

const prepared = new WeakMap<BetterSqlite3.Database, Statements>();

function statements(db: Db): Statements {
  // drizzle(client) keeps the better-sqlite3 handle as `$client`; its type leaves it out.
  const client = (db as unknown as { $client: BetterSqlite3.Database }).$client;
  let s = prepared.get(client);
  if (!s) {
    s = {
      runsByStatus: client.prepare(RUNS_BY_STATUS),
      iterationsByOutcome: client.prepare(ITERATIONS_BY_OUTCOME),
      tools: client.prepare(TOOLS),
      toolErrors: client.prepare(TOOL_ERRORS),
    };
    prepared.set(client, s);
  }
  return s;
}

/** Runs created in the window, by status and reason. */
export function runsByStatus(db: Db, w: DayWindow): RunsByStatusRow[] {
  return statements(db).runsByStatus.all(w);
}

/** Decided iterations of the runs created in the window, by outcome. */
export function iterationsByOutcome(db: Db, w: DayWindow): IterationsByOutcomeRow[] {
  return statements(db).iterationsByOutcome.all(w);
}

/** Tool calls made in the window, by server and tool, most called first. */
export function toolsInWindow(db: Db, w: DayWindow): ToolRow[] {
  return statements(db).tools.all(w);
}

/** The most common errors of the tool calls made in the window. */
export function toolErrorsInWindow(db: Db, w: DayWindow, limit: number): ToolErrorRow[] {
  return statements(db).toolErrors.all({ ...w, limit });
}
