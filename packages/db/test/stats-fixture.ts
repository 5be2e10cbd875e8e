/**
 * A history of runs, iterations and tool calls spread over ~100 hours (five days), then later writes (runs
 * finishing, iterations decided after their run finished, tool calls changed, deletes), as
 * plain SQL that both engines run: the same rows on SQLite and PostgreSQL, for comparing their
 * statistics.
 */
export const HOUR = 3_600_000;
export const T0 = Date.UTC(2030, 4, 1);

/** A deterministic pseudo-random sequence, so a failure can be replayed. */
function random(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1_103_515_245 + 12_345) % 2 ** 31;
    return x / 2 ** 31;
  };
}

type Value = string | number | boolean | null;
export interface Statement {
  sql: string;
  params: Value[];
}

/** Statements with `?` placeholders (PostgreSQL: rewrite them as $n). */
export function statsHistory(): Statement[] {
  const out: Statement[] = [];
  const rnd = random(7);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
  for (let i = 0; i < 300; i++) {
    const id = `run-${String(i).padStart(4, "0")}`;
    const createdAt =
      T0 + Math.floor(rnd() * 100) * HOUR + (i % 5 === 0 ? 0 : Math.floor(rnd() * HOUR));
    const status = pick(["queued", "running", "succeeded", "succeeded", "failed", "stopped"]);
    const reason =
      status === "failed"
        ? pick(["max_iterations", "error", null])
        : status === "succeeded"
          ? "success"
          : null;
    const metrics =
      rnd() < 0.05
        ? "{}"
        : JSON.stringify({
            iterations: Math.floor(rnd() * 6),
            validationFailures: Math.floor(rnd() * 4),
            reviewBlockings: Math.floor(rnd() * 2),
          });
    const startedAt = status === "queued" ? null : createdAt + 10;
    const finishedAt =
      ["succeeded", "failed", "stopped"].includes(status) && rnd() < 0.9
        ? createdAt + Math.floor(rnd() * 90_000)
        : null;
    out.push({
      sql: "insert into sessions (id, workspace, created_at) values (?, '/w', 0)",
      params: [id],
    });
    // Runs are inserted queued and moved to their status afterwards, as the engine does.
    out.push({
      sql: `insert into runs (id, session_id, task, spec, workspace, status, reason, metrics,
        created_at, started_at, finished_at) values (?, ?, 't', '{}', '/w', 'queued', null, '{}', ?, null, null)`,
      params: [id, id, createdAt],
    });
    const n = Math.floor(rnd() * 4);
    for (let k = 1; k <= n; k++) {
      const st = pick(["running", "passed", "failed", "failed", "abandoned"]);
      const outcome =
        st === "running" ? null : pick(["complete", "validation_failed", "agent_failed", null]);
      out.push({
        sql: `insert into iterations (run_id, n, attempt, status, outcome, prompt, validation,
          started_at, finished_at) values (?, ?, 1, ?, ?, 'p', '[]', ?, ?)`,
        params: [
          id,
          k,
          st,
          outcome,
          createdAt + k,
          rnd() < 0.8 ? createdAt + k + Math.floor(rnd() * 5000) : null,
        ],
      });
    }
    for (let k = 1; k <= Math.floor(rnd() * 3); k++) {
      const isError = rnd() < 0.3;
      out.push({
        sql: `insert into tool_calls (run_id, seq, iteration, server, tool, args, is_error, result,
          duration_ms, created_at) values (?, ?, 1, ?, ?, '{}', ?, ?, ?, ?)`,
        params: [
          id,
          k,
          pick(["workspace", "git", "Zeta"]),
          pick(["read_text_file", "write_file", "run", "Alpha"]),
          isError,
          isError ? pick(["ENOENT", "EACCES", "x".repeat(300)]) : "ok",
          Math.floor(rnd() * 100),
          T0 + Math.floor(rnd() * 101 * HOUR),
        ],
      });
    }
    out.push({
      sql: `update runs set status = ?, reason = ?, metrics = ?, started_at = ?, finished_at = ?
        where id = ?`,
      params: [status, reason, metrics, startedAt, finishedAt, id],
    });
  }
  const every = (k: number, r: number) => `cast(substr(run_id, 5) as integer) % ${k} = ${r}`;
  const everyRun = (k: number, r: number) => `cast(substr(id, 5) as integer) % ${k} = ${r}`;
  // Later writes: runs finishing (their running iteration decided after them, as a commit
  // writes them), abandoned attempts, changed tool calls, deletes (of runs, and of single
  // iterations and tool calls).
  out.push({
    sql: `update runs set status = 'failed', reason = 'error', finished_at = created_at + 5,
      metrics = '{"iterations": 7}' where status = 'running' and ${everyRun(2, 0)}`,
    params: [],
  });
  out.push({
    sql: `update iterations set status = 'passed', outcome = 'complete',
      finished_at = started_at + 77 where status = 'running'`,
    params: [],
  });
  out.push({
    sql: `update iterations set status = 'abandoned' where n = 2 and ${every(3, 0)}`,
    params: [],
  });
  out.push({
    sql: `update tool_calls set is_error = ?, result = 'late' where seq = 2 and ${every(4, 0)}`,
    params: [true],
  });
  out.push({ sql: `delete from iterations where n = 3 and ${every(5, 0)}`, params: [] });
  out.push({ sql: `delete from tool_calls where seq = 1 and ${every(3, 1)}`, params: [] });
  out.push({ sql: "delete from tool_calls where server = 'Zeta' and tool = 'Alpha'", params: [] });
  out.push({ sql: `delete from runs where ${everyRun(17, 0)}`, params: [] });
  return out;
}

/** The windows the statistics are compared over. */
export const STATS_WINDOWS: [string, number | undefined, number | undefined][] = [
  ["all time", undefined, undefined],
  ["since, on the hour", T0 + 3 * HOUR, undefined],
  ["since, mid-hour", T0 + 3 * HOUR + 1234, undefined],
  ["until, mid-hour", undefined, T0 + 20 * HOUR + 99],
  ["both mid-hour", T0 + 5 * HOUR + 1, T0 + 30 * HOUR - 1],
  ["both on the hour", T0 + 5 * HOUR, T0 + 30 * HOUR],
  ["inside one hour", T0 + 7 * HOUR + 10, T0 + 7 * HOUR + 3_000_000],
  ["across one boundary", T0 + 7 * HOUR + 10, T0 + 8 * HOUR + 10],
  ["across days, mid-hour", T0 + 5 * HOUR + 1, T0 + 80 * HOUR - 1],
  ["across days, on the hour", T0 + 5 * HOUR, T0 + 80 * HOUR],
  ["whole days", T0 + 24 * HOUR, T0 + 72 * HOUR],
  ["a day and an hour, mid-hour", T0 + 23 * HOUR + 7, T0 + 48 * HOUR + 7],
  ["since, days ago", T0 + 30 * HOUR + 5, undefined],
  ["until, days in", undefined, T0 + 50 * HOUR + 5],
  ["empty", T0 + 200 * HOUR, undefined],
];

/** The daily sums' tables: name prefix, key columns, summed columns. */
export const DAILY_SUMS = [
  [
    "run_stats",
    "status, reason",
    "runs, iterations, iterations_runs, validation_failures, review_blockings, duration_ms, duration_runs",
  ],
  ["iteration_stats", "outcome", "iterations, duration_ms, timed"],
  ["tool_stats", "server, tool", "calls, failures, duration_ms"],
  ["tool_errors", "server, tool, error", "count"],
] as const;

/**
 * A query (either engine) counting the rows where a daily table and its hourly table summed by
 * day disagree: 0 when every day holds exactly the sums of its hours.
 */
export function dailyMismatchesSql(): string {
  return DAILY_SUMS.map(([table, keys, sums]) => {
    const daily = `select day, ${keys}, ${sums} from ${table}_daily`;
    const summed = `select hour / 24, ${keys}, ${sums
      .split(", ")
      .map((c) => `sum(${c})`)
      .join(", ")} from ${table}_hourly group by hour / 24, ${keys}`;
    return `select count(*) as n from (select * from (${daily} except ${summed}) a
      union all select * from (${summed} except ${daily}) b) x`;
  })
    .map((q) => `(${q})`)
    .join(" + ")
    .replace(/^/, "select ")
    .concat(" as n");
}
