import {
  convergenceStats,
  type Database,
  MIGRATIONS_FOLDER,
  openDatabase,
  toolStats,
} from "@looprun/db";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DAILY_SUMS, dailyMismatchesSql, HOUR, STATS_WINDOWS, T0 } from "./stats-fixture";
import { freshDatabase, migrationTime, removeDir } from "./support";

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
      // Spread over ~100 hours (five days), a few runs an hour, some exactly on the hour.
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
        const at = T0 + Math.floor(rnd() * 101 * HOUR);
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

  it.each(STATS_WINDOWS)("GET /api/stats equals the rows' aggregate: %s", (_, since, until) => {
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

  it.each(STATS_WINDOWS.filter(([, , until]) => until === undefined))(
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
          + (select count(*) from tool_errors_hourly where count = 0)
          + (select count(*) from run_stats_daily where runs = 0)
          + (select count(*) from iteration_stats_daily where iterations = 0)
          + (select count(*) from tool_stats_daily where calls = 0)
          + (select count(*) from tool_errors_daily where count = 0) n`,
      )
      .get() as { n: number };
    expect(zero.n).toBe(0);
  });

  it("holds in each day's sums exactly the sums of its hours", () => {
    const days = database.sqlite.prepare("select count(*) n from run_stats_daily").get() as {
      n: number;
    };
    expect(days.n).toBeGreaterThan(5);
    expect(database.sqlite.prepare(dailyMismatchesSql()).get()).toEqual({ n: 0 });
  });
});

/** The daily tables' rows, and what summing the hourly tables by day gives (same order). */

function dailyRows(database: Database) {
  return DAILY_SUMS.map(([table, keys, sums]) =>
    database.sqlite
      .prepare(`select day, ${keys}, ${sums} from ${table}_daily order by day, ${keys}`)
      .all(),
  );
}

function daysOfHours(database: Database) {
  return DAILY_SUMS.map(([table, keys, sums]) =>
    database.sqlite
      .prepare(
        `select hour / 24 as day, ${keys}, ${sums
          .split(", ")
          .map((c) => `sum(${c}) as ${c}`)
          .join(", ")}
         from ${table}_hourly group by day, ${keys} order by day, ${keys}`,
      )
      .all(),
  );
}

describe("the daily sums of a database made before them", () => {
  it("are filled from its hourly sums by the migration", async () => {
    const { dir, path, database } = await freshDatabase();
    try {
      const s = database.sqlite;
      s.prepare("insert into sessions (id, workspace, created_at) values ('s', '/w', 0)").run();
      const run = s.prepare(
        `insert into runs (id, session_id, task, spec, workspace, status, reason, metrics,
           created_at, started_at, finished_at) values (?, 's', 't', '{}', '/w', ?, ?, ?, ?, ?, ?)`,
      );
      const call = s.prepare(
        `insert into tool_calls (run_id, seq, iteration, server, tool, args, is_error, result,
           duration_ms, created_at) values (?, 1, 1, 'workspace', ?, '{}', ?, ?, 5, ?)`,
      );
      for (let i = 0; i < 60; i++) {
        const at = T0 + i * 5 * HOUR + 17;
        const failed = i % 3 === 0;
        run.run(
          `r${i}`,
          failed ? "failed" : "succeeded",
          failed ? "error" : "success",
          JSON.stringify({ iterations: 1 + (i % 4) }),
          at,
          at + 1,
          at + 1000 + i,
        );
        call.run(
          `r${i}`,
          i % 2 ? "run" : "read_text_file",
          failed ? 1 : 0,
          failed ? "boom" : "ok",
          at,
        );
      }
      // The version before: no daily tables, no record of their migration.
      const expected = daysOfHours(database);
      for (const table of ["run_stats", "iteration_stats", "tool_stats", "tool_errors"]) {
        s.exec(`drop table ${table}_daily`);
        for (const change of ["insert", "update", "delete"])
          s.exec(`drop trigger ${table}_daily_${change}`);
      }
      s.prepare("delete from __drizzle_migrations where created_at >= ?").run(
        migrationTime(MIGRATIONS_FOLDER, "0013_stats_daily"),
      );
      database.close();

      const reopened = openDatabase(path);
      try {
        expect(dailyRows(reopened)).toEqual(expected);
        expect(expected[0]?.length).toBeGreaterThan(10);
        const before = convergenceStats(reopened.db, { since: T0 + 24 * HOUR });
        // The triggers are back: a run deleted now leaves its day.
        reopened.sqlite.prepare("delete from runs where id = 'r6'").run();
        expect(dailyRows(reopened)).toEqual(daysOfHours(reopened));
        const after = convergenceStats(reopened.db, { since: T0 + 24 * HOUR });
        expect(after.runs.total).toBe(before.runs.total - 1);
      } finally {
        reopened.close();
      }
    } finally {
      await removeDir(dir);
    }
  });
});
