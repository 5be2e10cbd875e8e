import { isPgUnavailable, openPgDatabase, type PgDatabase } from "@looprun/db/pg";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPgStallProxy } from "../../../tests/support/pg-stall-proxy";
import {
  createDatabase,
  type PostgresCluster,
  startPostgres,
} from "../../../tests/support/postgres";

/*
 * The query deadline (pg/query-deadline.ts) against a real server that stalls (its processes
 * paused): a transaction cut by it is rolled back, never committed by a later use of its
 * connection, and the pool serves again once the server does. The cluster is this file's own.
 */

const DEADLINE_MS = 800;
let cluster: PostgresCluster;
let database: PgDatabase;
let url: string;
let name: string;

beforeAll(async () => {
  cluster = await startPostgres();
  ({ url, name } = await createDatabase(cluster.adminUrl, "looprun_deadline"));
  database = await openPgDatabase(url, { queryTimeoutMs: DEADLINE_MS, maxConnections: 2 });
  await database.pool.query("create table t (v int)");
}, 120_000);

afterAll(async () => {
  await cluster?.thaw();
  await database?.close();
  await cluster?.stop();
});

describe("the query deadline (PostgreSQL)", () => {
  it("ends a transaction the stalled server does not answer; its writes are never committed", async () => {
    const cut = database.db.transaction(async (tx) => {
      await tx.execute(sql`insert into t values (1)`);
      await cluster.freeze();
      await tx.execute(sql`insert into t values (2)`);
    });
    let error: unknown;
    try {
      await cut;
    } catch (e) {
      error = e;
    } finally {
      await cluster.thaw();
    }
    // A lost connection, for the callers (the API answers 503 `unavailable`).
    expect(isPgUnavailable(error), String(error)).toBe(true);

    // Both connections of the pool are used again: neither may be the cut one, inside its
    // transaction (a COMMIT there would commit the first insert).
    await Promise.all([
      database.db.transaction(async (tx) => {
        await tx.execute(sql`insert into t values (3)`);
      }),
      database.db.transaction(async (tx) => {
        await tx.execute(sql`insert into t values (4)`);
      }),
    ]);
    const rows = await database.pool.query<{ v: number }>("select v from t order by v");
    expect(rows.rows.map((r) => r.v)).toEqual([3, 4]);
    // The server ended the cut session (it found its socket closed), rolling it back.
    const admin = await openPgDatabase(cluster.adminUrl, { maxConnections: 1 });
    try {
      const sessions = await admin.pool.query(
        "select state from pg_stat_activity where datname = $1 and backend_type = 'client backend'",
        [name],
      );
      // This pool's connections are there (the query sees the database), none inside a transaction.
      expect(sessions.rows.length).toBeGreaterThan(0);
      expect(
        sessions.rows.filter((r) => String(r.state).startsWith("idle in transaction")),
      ).toEqual([]);
    } finally {
      await admin.close();
    }
  }, 60_000);

  it("answers a query on a new connection to the stalled server with an error, not a wait", async () => {
    const fresh = await openPgDatabase(url, { queryTimeoutMs: DEADLINE_MS, maxConnections: 1 });
    await fresh.pool.query("select 1");
    // Its only connection taken, a second query needs one more: none comes from a stalled server.
    const held = await fresh.pool.connect();
    await cluster.freeze();
    try {
      const waited = fresh.pool.query("select 1").then(
        () => null,
        (e: unknown) => e,
      );
      expect(isPgUnavailable(await waited)).toBe(true);
    } finally {
      await cluster.thaw();
      held.release();
      await fresh.close();
    }
  }, 60_000);

  it("ends a new connection whose set-up query the server does not answer, after its start-up", async () => {
    // A server that hangs once it has accepted a session: the pool's connection timeout has
    // ended with the start-up; the set-up query (onConnect's SET) is bounded by the deadline.
    const proxy = await startPgStallProxy(cluster.port);
    const proxied = new URL(url);
    proxied.port = String(proxy.port);
    const fresh = await openPgDatabase(proxied.toString(), {
      queryTimeoutMs: DEADLINE_MS,
      maxConnections: 2,
    });
    try {
      await fresh.pool.query("select 1");
      // The pool's one connection taken, the next query opens a second one.
      const held = await fresh.pool.connect();
      proxy.stallAfterStartup = true;
      try {
        const waited = fresh.pool.query("select 1").then(
          () => null,
          (e: unknown) => e,
        );
        const error = await waited;
        expect(isPgUnavailable(error), String(error)).toBe(true);
        // It stalled where meant: after a start-up answered in full.
        expect(proxy.stalled).toBe(1);
      } finally {
        held.release();
      }
      // The stalled connection was not kept: once the server answers, the pool serves again.
      proxy.stallAfterStartup = false;
      const again = await Promise.all([
        fresh.pool.query("select 1 as v"),
        fresh.pool.query("select 2 as v"),
      ]);
      expect(again.map((r) => r.rows[0]?.v)).toEqual([1, 2]);
    } finally {
      await fresh.close();
      await proxy.close();
    }
  }, 60_000);
});
