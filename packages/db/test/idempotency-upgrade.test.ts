import { idempotencyKeyHash, openDatabase, RunRepository } from "@looprun/db";
import { openPgDatabase, PgRunRepository } from "@looprun/db/pg";
import { describe, expect, it } from "vitest";
import { freshPgDatabase } from "./pg-support";
import { freshDatabase, newRun, removeDir } from "./support";

// Keys a version before their hashing stored as written: hashed when the database is opened,
// so that a client's retry across the upgrade gets its run (it got a second one).

const seedRows = [
  "insert into sessions (id, workspace, created_at) values ('s', '/w', 0)",
  "insert into runs (id, session_id, task, spec, workspace, status, metrics, created_at) values ('r1', 's', 't', '{}', '/w', 'succeeded', '{}', 0)",
  "insert into runs (id, session_id, task, spec, workspace, status, metrics, created_at) values ('r2', 's', 't', '{}', '/w', 'succeeded', '{}', 0)",
];
/** As the old version stored them, and `retried`'s hash as a retry after the upgrade did. */
const keyRows = (now: number) => [
  ["legacy-key", "h1", "r1", now],
  ["retried-key", "h2", "r1", now],
  [idempotencyKeyHash("retried-key"), "h2", "r2", now],
];

describe("Idempotency-Keys stored as written by an older version", () => {
  it("are hashed when the SQLite file is opened: a retry gets its run", async () => {
    const { dir, path, database } = await freshDatabase();
    try {
      for (const row of seedRows) database.sqlite.prepare(row).run();
      const insert = database.sqlite.prepare(
        "insert into idempotency_keys (key, request_hash, run_id, created_at) values (?, ?, ?, ?)",
      );
      for (const row of keyRows(Date.now())) insert.run(...row);
      database.close();

      const reopened = openDatabase(path);
      try {
        const keys = reopened.sqlite
          .prepare("select key, run_id as runId from idempotency_keys order by run_id, key")
          .all();
        expect(keys).toEqual([
          { key: idempotencyKeyHash("legacy-key"), runId: "r1" },
          { key: idempotencyKeyHash("retried-key"), runId: "r2" },
        ]);
        const repo = new RunRepository(reopened.db);
        const retry = newRun({}, { sessionId: "s2" });
        expect(
          repo.createRun({
            ...retry,
            idempotency: { key: idempotencyKeyHash("legacy-key"), requestHash: "h1" },
          }),
        ).toMatchObject({ id: "r1", replayed: true });
      } finally {
        reopened.close();
      }
    } finally {
      await removeDir(dir);
    }
  });

  it("are hashed when the PostgreSQL database is opened: a retry gets its run", async () => {
    const pg = await freshPgDatabase();
    try {
      for (const row of seedRows) await pg.database.pool.query(row);
      for (const row of keyRows(Date.now())) {
        await pg.database.pool.query(
          "insert into idempotency_keys (key, request_hash, run_id, created_at) values ($1, $2, $3, $4)",
          row,
        );
      }
      const reopened = await openPgDatabase(pg.url);
      try {
        const { rows } = await reopened.pool.query(
          'select key, run_id as "runId" from idempotency_keys order by run_id, key',
        );
        expect(rows).toEqual([
          { key: idempotencyKeyHash("legacy-key"), runId: "r1" },
          { key: idempotencyKeyHash("retried-key"), runId: "r2" },
        ]);
        const repo = new PgRunRepository(reopened.db);
        const retry = newRun({}, { sessionId: "s2" });
        expect(
          await repo.createRun({
            ...retry,
            idempotency: { key: idempotencyKeyHash("legacy-key"), requestHash: "h1" },
          }),
        ).toMatchObject({ id: "r1", replayed: true });
      } finally {
        await reopened.close();
      }
    } finally {
      await pg.drop();
    }
  });
});
