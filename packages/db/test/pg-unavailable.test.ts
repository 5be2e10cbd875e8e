import { createServer } from "node:net";
import { isPgUnavailable } from "@looprun/db/pg";
import pg from "pg";
import { describe, expect, it } from "vitest";

/*
 * Which PostgreSQL errors put a step off (the database is down for now) rather than fail the
 * run. The connection errors are real ones, from node-postgres.
 */

const withCode = (code: string) => Object.assign(new Error(`error ${code}`), { code });
/** As drizzle wraps the driver's error: the query and its parameters, the cause inside. */
const wrapped = (cause: Error) =>
  Object.assign(new Error("Failed query: select 1\nparams: "), { query: "select 1", cause });

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

describe("isPgUnavailable", () => {
  it("recognises a server that refuses connections, also when wrapped", async () => {
    const client = new pg.Client({ host: "127.0.0.1", port: await closedPort() });
    const error = await client.connect().then(
      () => null,
      (e: Error) => e,
    );
    expect(error).toBeInstanceOf(Error);
    expect(isPgUnavailable(error)).toBe(true);
    expect(isPgUnavailable(wrapped(error as Error))).toBe(true);
  });

  it("recognises a connection that ends mid-query", async () => {
    // A server that accepts and closes at once: node-postgres' own "Connection terminated…".
    const server = createServer((socket) => socket.destroy());
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const { port } = server.address() as { port: number };
    try {
      const client = new pg.Client({ host: "127.0.0.1", port });
      const error = await client.connect().then(
        () => null,
        (e: Error) => e,
      );
      expect(isPgUnavailable(error)).toBe(true);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it("recognises shutdowns, restarts, deadlocks and serialization failures by SQLSTATE", () => {
    for (const code of ["57P01", "57P03", "08006", "40P01", "40001", "55P03", "25P03"]) {
      expect(isPgUnavailable(wrapped(withCode(code))), code).toBe(true);
    }
  });

  it("leaves faults of the call itself to fail it", () => {
    // A unique violation, a syntax error, a protocol violation (a bug: it would repeat).
    for (const code of ["23505", "42601", "08P01", "22P02"]) {
      expect(isPgUnavailable(wrapped(withCode(code))), code).toBe(false);
    }
    expect(isPgUnavailable(new Error("something else"))).toBe(false);
    expect(isPgUnavailable("a string")).toBe(false);
  });
});
