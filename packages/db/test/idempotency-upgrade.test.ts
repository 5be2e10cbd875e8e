import { idempotencyKeyHash, RunRepository } from "@looprun/db";
import { PgRunRepository } from "@looprun/db/pg";
import { describe, expect, it } from "vitest";
import { upgradedPg } from "./pg-support";
import { newRun, upgradedSqlite } from "./support";

// Keys a version before their hashing stored as written: hashed by a migration (SQLite 0012,
// PostgreSQL 0007), so that a client's retry across the upgrade gets its run (it got a second
// one). Each test makes the database of that version: migrated, its record of the migration
// removed, the rows as it wrote them.

const seedRows = [
  "insert into sessions (id, workspace, created_at) values ('s', '/w', 0)",
  "insert into runs (id, session_id, task, spec, workspace, status, metrics, created_at) values ('r1', 's', 't', '{}', '/w', 'succeeded', '{}', 0)",
  "insert into runs (id, session_id, task, spec, workspace, status, metrics, created_at) values ('r2', 's', 't', '{}', '/w', 'succeeded', '{}', 0)",
];
/**
 * As the old version stored them; `retried-key`'s hash as a retry made by a hashing version
 * before the migration ran did; and a key that was 64 hex digits as sent (taken for a hash).
 */
const keyRows = (now: number) => [
  ["legacy-key", "h1", "r1", now],
  ["retried-key", "h2", "r1", now],
  [idempotencyKeyHash("retried-key"), "h2", "r2", now],
  ["a".repeat(64), "h3", "r2", now],
];
const expected = [
  { key: idempotencyKeyHash("legacy-key"), runId: "r1" },
  { key: "a".repeat(64), runId: "r2" },
  { key: idempotencyKeyHash("retried-key"), runId: "r2" },
].sort((a, b) => (a.runId + a.key < b.runId + b.key ? -1 : 1));

describe("Idempotency-Keys stored as written by an older version", () => {
  it("are hashed by the SQLite migration: a retry gets its run", async () => {
    await upgradedSqlite(
      "0012_hash_legacy_idempotency_keys",
      (sqlite) => {
        for (const row of seedRows) sqlite.prepare(row).run();
        const insert = sqlite.prepare(
          "insert into idempotency_keys (key, request_hash, run_id, created_at) values (?, ?, ?, ?)",
        );
        for (const row of keyRows(Date.now())) insert.run(...row);
      },
      (reopened) => {
        const keys = reopened.sqlite
          .prepare("select key, run_id as runId from idempotency_keys order by run_id || key")
          .all();
        expect(keys).toEqual(expected);
        const repo = new RunRepository(reopened.db);
        const retry = newRun({}, { sessionId: "s2" });
        expect(
          repo.createRun({
            ...retry,
            idempotency: { key: idempotencyKeyHash("legacy-key"), requestHash: "h1" },
          }),
        ).toMatchObject({ id: "r1", replayed: true });
      },
    );
  });

  it("are hashed by the PostgreSQL migration: a retry gets its run", async () => {
    await upgradedPg(
      "0007_hash_legacy_idempotency_keys",
      async (pool) => {
        for (const row of seedRows) await pool.query(row);
        for (const row of keyRows(Date.now())) {
          await pool.query(
            "insert into idempotency_keys (key, request_hash, run_id, created_at) values ($1, $2, $3, $4)",
            row,
          );
        }
      },
      async (reopened) => {
        const { rows } = await reopened.pool.query(
          `select key, run_id as "runId" from idempotency_keys order by run_id || key collate "C"`,
        );
        expect(rows).toEqual(expected);
        const repo = new PgRunRepository(reopened.db);
        const retry = newRun({}, { sessionId: "s2" });
        expect(
          await repo.createRun({
            ...retry,
            idempotency: { key: idempotencyKeyHash("legacy-key"), requestHash: "h1" },
          }),
        ).toMatchObject({ id: "r1", replayed: true });
      },
    );
  });
});
