/**
 * A history of runs, iterations and tool calls spread over ~40 hours, then later writes (runs
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
      T0 + Math.floor(rnd() * 40) * HOUR + (i % 5 === 0 ? 0 : Math.floor(rnd() * HOUR));
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
          T0 + Math.floor(rnd() * 41 * HOUR),
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
  // writes them), abandoned attempts, changed tool calls, deletes.
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
  ["empty", T0 + 100 * HOUR, undefined],
];
