import { type Database, openDatabase, RunRepository } from "@looprun/db";
import { PgRunRepository } from "@looprun/db/pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshPgDatabase } from "./pg-support";
import { dailyMismatchesSql, STATS_WINDOWS, statsHistory } from "./stats-fixture";

/*
 * The statistics of GET /api/stats and /api/stats/tools, and the run counts of /metrics, on
 * PostgreSQL (daily and hourly sums of finished runs kept by triggers, active runs read from
 * their rows) against SQLite's (daily and hourly sums of every run, which stats-hourly.test.ts
 * checks against the rows themselves), on the same rows written in the same order.
 */
describe("PostgreSQL statistics", () => {
  let sqlite: Database;
  let pg: Awaited<ReturnType<typeof freshPgDatabase>>;
  let lite: RunRepository;
  let repo: PgRunRepository;

  beforeAll(async () => {
    sqlite = openDatabase(":memory:");
    pg = await freshPgDatabase();
    lite = new RunRepository(sqlite.db);
    repo = new PgRunRepository(pg.database.db);
    for (const s of statsHistory()) {
      sqlite.sqlite
        .prepare(s.sql)
        .run(...s.params.map((p) => (typeof p === "boolean" ? Number(p) : p)));
      let i = 0;
      await pg.database.pool.query(
        s.sql.replaceAll("?", () => `$${++i}`),
        s.params,
      );
    }
  }, 120_000);
  afterAll(async () => {
    sqlite?.close();
    await pg?.drop();
  });

  it.each(STATS_WINDOWS)("GET /api/stats gives SQLite's answer: %s", async (_, since, until) => {
    const filter = {
      ...(since !== undefined ? { since } : {}),
      ...(until !== undefined ? { until } : {}),
    };
    const expected = lite.convergenceStats(filter);
    expect(expected.runs.total).toBeGreaterThan(since === undefined ? 40 : -1);
    expect(await repo.convergenceStats(filter)).toEqual(expected);
  });

  it.each(STATS_WINDOWS.filter(([, , until]) => until === undefined))(
    "GET /api/stats/tools gives SQLite's answer: %s",
    async (_, since) => {
      const filter = since === undefined ? {} : { since };
      const expected = lite.toolStats(filter);
      expect(await repo.toolStats(filter)).toEqual(expected);
    },
  );

  it("gives SQLite's tool statistics of single runs", async () => {
    const runs = lite.listRuns({ limit: 100 }).items;
    let withCalls = 0;
    for (const run of runs) {
      const expected = lite.toolStats({ runId: run.id });
      if (expected.totals.calls > 0) withCalls += 1;
      expect(await repo.toolStats({ runId: run.id })).toEqual(expected);
    }
    expect(withCalls).toBeGreaterThan(10);
  });

  it("counts runs by status for /metrics as SQLite does", async () => {
    const order = (rows: { status: string; count: number }[]) =>
      [...rows].sort((a, b) => (a.status < b.status ? -1 : 1));
    const visit = () => {};
    const expected = await lite.metricsReader().read(visit);
    const read = await repo.metricsReader().read(visit);
    expect(order(read.runCountsByStatus)).toEqual(order(expected.runCountsByStatus));
    expect(read.newToolCalls.length).toBeGreaterThan(0);
  });

  it("reads live runs for any number of watched ids (one array parameter, not 65535+)", async () => {
    const ids = Array.from({ length: 70_000 }, (_, i) => `run-${String(i).padStart(4, "0")}`);
    const live = await repo.liveRuns(ids, "ZZZZZZZZZZZZZZZZZZZZZZZZZZ");
    const expected = lite.liveRuns(ids.slice(0, 1000), "ZZZZZZZZZZZZZZZZZZZZZZZZZZ");
    const sorted = (runs: { id: string }[]) => runs.map((r) => r.id).sort();
    expect(sorted(live)).toEqual(sorted(expected));
    expect(live.length).toBeGreaterThan(100);
  });

  it("holds the finished runs in the hourly sums, and only them", async () => {
    const { rows } = await pg.database.pool.query<{ summed: number; finished: number }>(
      `select (select sum(runs) from run_stats_hourly)::int as summed,
        (select count(*) from runs where status in ('succeeded', 'failed', 'stopped'))::int as finished`,
    );
    expect(rows[0]?.finished).toBeGreaterThan(50);
    expect(rows[0]?.summed).toBe(rows[0]?.finished);
  });

  it("keeps no empty groups behind", async () => {
    const { rows } = await pg.database.pool.query<{ n: number }>(
      `select ((select count(*) from run_stats_hourly where runs = 0)
        + (select count(*) from iteration_stats_hourly where iterations = 0)
        + (select count(*) from tool_stats_hourly where calls = 0)
        + (select count(*) from tool_errors_hourly where count = 0)
        + (select count(*) from run_stats_daily where runs = 0)
        + (select count(*) from iteration_stats_daily where iterations = 0)
        + (select count(*) from tool_stats_daily where calls = 0)
        + (select count(*) from tool_errors_daily where count = 0))::int as n`,
    );
    expect(rows[0]?.n).toBe(0);
  });

  it("holds in each day's sums exactly the sums of its hours", async () => {
    const { rows } = await pg.database.pool.query<{ days: number }>(
      "select count(*)::int as days from run_stats_daily",
    );
    expect(rows[0]?.days).toBeGreaterThan(3);
    const mismatches = await pg.database.pool.query<{ n: string }>(dailyMismatchesSql());
    expect(Number(mismatches.rows[0]?.n)).toBe(0);
  });
});
