import { convergenceStats, type Database, openDatabase, toolStats } from "@looprun/db";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const HOUR = 3_600_000;
const T0 = Date.UTC(2030, 4, 1);

/** A deterministic pseudo-random sequence, so a failure can be replayed. */
function random(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1_103_515_245 + 12_345) % 2 ** 31;
    return x / 2 ** 31;
  };
}

/**
 * What the stats mean, computed from the rows themselves (the queries the hourly sums replace):
 * the triggers and the window split must give exactly these answers.
 */
function reference(database: Database, since?: number, until?: number) {
  const sqlite = database.sqlite;
  const inWindow = "created_at >= ? and created_at < ?";
  const w = [since ?? Number.MIN_SAFE_INTEGER, until ?? Number.MAX_SAFE_INTEGER];
  const m = (k: string) => `json_extract(metrics, '$.${k}')`;
  return {
    byStatus: sqlite
      .prepare(`select status, count(*) n from runs where ${inWindow} group by status order by 1`)
      .all(...w),
    totals: sqlite
      .prepare(
        `select coalesce(sum(${m("iterations")}), 0) i, coalesce(sum(${m("validationFailures")}), 0) v,
          coalesce(sum(${m("reviewBlockings")}), 0) b from runs where ${inWindow}`,
      )
      .get(...w),
    converged: sqlite
      .prepare(
        `select avg(${m("iterations")}) i, avg(finished_at - started_at) t from runs
         where ${inWindow} and status = 'succeeded'`,
      )
      .get(...w),
    iterationMs: sqlite
      .prepare(
        `select avg(i.finished_at - i.started_at) ms from iterations i join runs r on r.id = i.run_id
         where r.${inWindow} and i.status in ('passed', 'failed') and i.finished_at is not null`,
      )
      .get(...w),
    reasons: sqlite
      .prepare(
        `select coalesce(reason, 'unknown') reason, count(*) count from runs
         where ${inWindow} and status = 'failed' group by reason order by 2 desc, 1`,
      )
      .all(...w),
    outcomes: sqlite
      .prepare(
        `select coalesce(i.outcome, 'unknown') outcome, count(*) count from iterations i
         join runs r on r.id = i.run_id where r.${inWindow} and i.status in ('passed', 'failed')
         group by i.outcome order by 2 desc, 1`,
      )
      .all(...w),
    tools: sqlite
      .prepare(
        `select server, tool, count(*) calls, sum(is_error) failures, avg(duration_ms) mean
         from tool_calls where ${inWindow} group by server, tool order by 3 desc, 1, 2`,
      )
      .all(...w),
    errors: sqlite
      .prepare(
        `select server, tool, substr(result, 1, 200) error, count(*) count from tool_calls
         where ${inWindow} and is_error = 1 group by 1, 2, 3 order by 4 desc, 1, 2, 3 limit 10`,
      )
      .all(...w),
  };
}

describe("stats from the hourly sums", () => {
  let database: Database;
  beforeAll(() => {
    database = openDatabase(":memory:");
    const rnd = random(42);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
    const s = database.sqlite;
    const insertRun = s.prepare(
      `insert into runs (id, session_id, task, spec, workspace, status, reason, metrics, created_at,
         started_at, finished_at) values (?, ?, 't', '{}', '/w', ?, ?, ?, ?, ?, ?)`,
    );
    const insertIteration = s.prepare(
      `insert into iterations (run_id, n, attempt, status, outcome, prompt, validation, started_at,
         finished_at) values (?, ?, 1, ?, ?, 'p', '[]', ?, ?)`,
    );
    const insertCall = s.prepare(
      `insert into tool_calls (run_id, seq, iteration, server, tool, args, is_error, result,
         duration_ms, created_at) values (?, ?, 1, ?, ?, '{}', ?, ?, ?, ?)`,
    );
    for (let i = 0; i < 400; i++) {
      const id = `run-${i}`;
      // Spread over ~40 hours, several runs an hour, some exactly on the hour.
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
      s.prepare("insert into sessions (id, workspace, created_at) values (?, '/w', 0)").run(id);
      insertRun.run(id, id, status, reason, metrics, createdAt, startedAt, finishedAt);
      const n = Math.floor(rnd() * 4);
      for (let k = 1; k <= n; k++) {
        const st = pick(["running", "passed", "failed", "failed", "abandoned"]);
        const outcome =
          st === "running" ? null : pick(["complete", "validation_failed", "agent_failed", null]);
        insertIteration.run(
          id,
          k,
          st,
          outcome,
          createdAt + k,
          rnd() < 0.8 ? createdAt + k + Math.floor(rnd() * 5000) : null,
        );
      }
      for (let k = 1; k <= Math.floor(rnd() * 3); k++) {
        const isError = rnd() < 0.3 ? 1 : 0;
        const at = T0 + Math.floor(rnd() * 41 * HOUR);
        insertCall.run(
          id,
          k,
          pick(["workspace", "git"]),
          pick(["read_text_file", "write_file", "run"]),
          isError,
          isError ? pick(["ENOENT", "EACCES", "x".repeat(300)]) : "ok",
          Math.floor(rnd() * 100),
          at,
        );
      }
    }
    // Later writes: the engine's updates, an abandoned attempt, undone submits.
    s.prepare(
      `update runs set status = 'failed', reason = 'error', finished_at = created_at + 5,
         metrics = json_set(metrics, '$.iterations', 7) where status = 'running' and rowid % 2 = 0`,
    ).run();
    s.prepare(
      "update iterations set status = 'passed', outcome = 'complete', finished_at = started_at + 77 where status = 'running'",
    ).run();
    s.prepare("update iterations set status = 'abandoned' where n = 2 and rowid % 3 = 0").run();
    s.prepare(
      "update tool_calls set is_error = 1, result = 'late' where seq = 2 and rowid % 4 = 0",
    ).run();
    s.prepare("delete from runs where rowid % 17 = 0").run();
    s.prepare("delete from iterations where n = 3 and rowid % 5 = 0").run();
  });
  afterAll(() => database.close());

  const windows: [string, number | undefined, number | undefined][] = [
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

  it.each(windows)("GET /api/stats equals the rows' aggregate: %s", (_, since, until) => {
    const ref = reference(database, since, until);
    const stats = convergenceStats(database.db, {
      ...(since !== undefined ? { since } : {}),
      ...(until !== undefined ? { until } : {}),
    });
    const byStatus = Object.entries(stats.runs.byStatus)
      .filter(([, n]) => n > 0)
      .map(([status, n]) => ({ status, n }))
      .sort((a, b) => (a.status < b.status ? -1 : 1));
    expect(byStatus).toEqual(ref.byStatus);
    const totals = ref.totals as { i: number; v: number; b: number };
    expect([stats.iterations, stats.validationFailures, stats.reviewBlockings]).toEqual([
      totals.i,
      totals.v,
      totals.b,
    ]);
    const r2 = (x: number | null, d = 0) => (x === null ? null : Math.round(x * 10 ** d) / 10 ** d);
    const converged = ref.converged as { i: number | null; t: number | null };
    expect(stats.meanIterationsToConverge).toBe(r2(converged.i, 2));
    expect(stats.meanTimeToConvergeMs).toBe(r2(converged.t));
    expect(stats.meanIterationTimeMs).toBe(r2((ref.iterationMs as { ms: number | null }).ms));
    expect(stats.commonFailureReasons).toEqual(ref.reasons);
    expect(stats.iterationOutcomes).toEqual(ref.outcomes);
  });

  it.each(windows.filter(([, , until]) => until === undefined))(
    "GET /api/stats/tools equals the rows' aggregate: %s",
    (_, since) => {
      const ref = reference(database, since);
      const stats = toolStats(database.db, since === undefined ? {} : { since });
      const tools = ref.tools as {
        server: string;
        tool: string;
        calls: number;
        failures: number;
        mean: number;
      }[];
      expect(stats.tools).toEqual(
        tools.map((t) => ({
          server: t.server,
          tool: t.tool,
          calls: t.calls,
          failures: t.failures,
          successRate: Math.round(((t.calls - t.failures) / t.calls) * 1000) / 1000,
          meanDurationMs: Math.round(t.mean),
        })),
      );
      expect(stats.totals.calls).toBe(tools.reduce((n, t) => n + t.calls, 0));
      expect(stats.commonErrors).toEqual(ref.errors);
    },
  );

  it("keeps no empty groups behind", () => {
    const zero = database.sqlite
      .prepare(
        `select (select count(*) from run_stats_hourly where runs = 0)
          + (select count(*) from iteration_stats_hourly where iterations = 0)
          + (select count(*) from tool_stats_hourly where calls = 0)
          + (select count(*) from tool_errors_hourly where count = 0) n`,
      )
      .get() as { n: number };
    expect(zero.n).toBe(0);
  });
});
