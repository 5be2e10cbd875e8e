import { createServer } from "node:net";
import { isPgUnavailable } from "@looprun/db/pg";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../../tests/support/redis-server";
import { freshPgDatabase } from "./pg-support";

/*
 * Which PostgreSQL errors put a step off (the database is down for now) rather than fail the
 * run. Every error here is a real one, raised by the test cluster or by node-postgres.
 */

let fresh: Awaited<ReturnType<typeof freshPgDatabase>>;
beforeAll(async () => {
  fresh = await freshPgDatabase();
  await fresh.database.pool.query("create table t (id int primary key)");
  await fresh.database.pool.query("insert into t values (1), (2)");
});
afterAll(async () => {
  await fresh?.drop();
});

/** A client of its own (its errors on a broken connection must not end the test). */
async function client(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: fresh.url });
  c.on("error", () => {});
  await c.connect();
  return c;
}

const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error("expected it to fail");
    },
    (e: Error) => e,
  );

/** As drizzle wraps the driver's error: the query and its parameters, the cause inside. */
const wrapped = (cause: Error) =>
  Object.assign(new Error("Failed query: select 1\nparams: "), { query: "select 1", cause });

describe("isPgUnavailable", () => {
  it("recognises a server that refuses connections, also when wrapped", async () => {
    const c = new pg.Client({ host: "127.0.0.1", port: await freePort() });
    const error = await failure(c.connect());
    expect(isPgUnavailable(error)).toBe(true);
    expect(isPgUnavailable(wrapped(error))).toBe(true);
  });

  it("recognises a connection that ends during the handshake", async () => {
    const server = createServer((socket) => socket.destroy());
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const { port } = server.address() as { port: number };
    try {
      const error = await failure(new pg.Client({ host: "127.0.0.1", port }).connect());
      expect(isPgUnavailable(error)).toBe(true);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it("recognises a session the server ends (a restart, a failover: 57P01)", async () => {
    const victim = await client();
    const { rows } = await victim.query<{ pid: number }>("select pg_backend_pid() as pid");
    await fresh.database.pool.query("select pg_terminate_backend($1)", [rows[0]!.pid]);
    const error = await failure(victim.query("select 1"));
    expect(isPgUnavailable(error)).toBe(true);
    await victim.end().catch(() => {});
  });

  it("recognises a lock not available (55P03) and a deadlock's victim (40P01)", async () => {
    const [a, b] = [await client(), await client()];
    try {
      await a.query("begin");
      await a.query("select * from t where id = 1 for update");
      await b.query("begin");
      const busy = await failure(b.query("select * from t where id = 1 for update nowait"));
      expect((busy as { code?: string }).code).toBe("55P03");
      expect(isPgUnavailable(busy)).toBe(true);
      await b.query("rollback");

      // Opposite orders: one of the two is chosen as the victim.
      await b.query("begin");
      await b.query("update t set id = id where id = 2");
      const first = a.query("update t set id = id where id = 2").then(
        () => null,
        (e: Error) => e,
      );
      const second = await b.query("update t set id = id where id = 1").then(
        () => null,
        (e: Error) => e,
      );
      const victim = second ?? (await first);
      expect((victim as { code?: string } | null)?.code).toBe("40P01");
      expect(isPgUnavailable(victim)).toBe(true);
    } finally {
      await a.query("rollback").catch(() => {});
      await b.query("rollback").catch(() => {});
      await Promise.all([a.end(), b.end()]);
    }
  });

  it("leaves faults of the call itself to fail it", async () => {
    const pool = fresh.database.pool;
    const unique = await failure(pool.query("insert into t values (1)"));
    const syntax = await failure(pool.query("selec 1"));
    const badValue = await failure(pool.query("select 'x'::int"));
    for (const error of [unique, syntax, badValue]) {
      expect(isPgUnavailable(wrapped(error)), error.message).toBe(false);
    }
    // 08P01, a protocol violation, is a bug that would repeat: not "unavailable" for all its class.
    const protocol = Object.assign(new Error("protocol violation"), { code: "08P01" });
    expect(isPgUnavailable(protocol)).toBe(false);
    expect(isPgUnavailable("a string")).toBe(false);
  });
});
