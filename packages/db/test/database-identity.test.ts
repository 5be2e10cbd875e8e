import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isLooprunDatabaseAt, openStorage } from "@looprun/db";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { createDatabase } from "../../../tests/support/postgres";
import { freshPgDatabase, postgresAdminUrl } from "./pg-support";

// isLooprunDatabaseAt (what `looprun gc` asks before it opens the workers' database): true for
// a database with looprun's tables, false for another one — which is left as it was.

const dir = mkdtempSync(join(tmpdir(), "looprun-identity-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("isLooprunDatabaseAt", () => {
  it("on SQLite: a file with looprun's tables, not a missing or another file (left untouched)", async () => {
    const missing = join(dir, "missing.db");
    expect(await isLooprunDatabaseAt({ path: missing })).toBe(false);
    expect(existsSync(missing)).toBe(false);
    const empty = join(dir, "empty.db");
    writeFileSync(empty, "");
    expect(await isLooprunDatabaseAt({ path: empty })).toBe(false);
    expect(statSync(empty).size).toBe(0);
    const real = join(dir, "looprun.db");
    await (await openStorage({ path: real })).close();
    expect(await isLooprunDatabaseAt({ path: real })).toBe(true);
  });

  it("on PostgreSQL: a migrated database, not an empty one (no table made in it)", async () => {
    const empty = await createDatabase(postgresAdminUrl(), "looprun_other");
    const migrated = await freshPgDatabase();
    try {
      expect(await isLooprunDatabaseAt({ url: empty.url, path: "" })).toBe(false);
      const client = new pg.Client({ connectionString: empty.url });
      await client.connect();
      try {
        const tables = await client.query(
          "select count(*)::int as n from information_schema.tables where table_schema = 'public'",
        );
        expect(tables.rows[0].n).toBe(0);
      } finally {
        await client.end();
      }
      expect(await isLooprunDatabaseAt({ url: migrated.url, path: "" })).toBe(true);
    } finally {
      await empty.drop();
      await migrated.drop();
    }
  });
});
