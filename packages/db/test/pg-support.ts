import { openPgDatabase, PG_MIGRATIONS_FOLDER, type PgDatabase } from "@looprun/db/pg";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach } from "vitest";
import { freshPostgresDatabase } from "../../../tests/support/pg-test-database";
import { migrationTime } from "./support";

export { postgresAdminUrl } from "../../../tests/support/pg-test-database";

/** A new database on the test cluster, migrated; `drop` closes and removes it. */
export async function freshPgDatabase(): Promise<{
  url: string;
  database: PgDatabase;
  drop(): Promise<void>;
}> {
  const created = await freshPostgresDatabase();
  const database = await openPgDatabase(created.url, { applicationName: "looprun-test" });
  return {
    url: created.url,
    database,
    async drop() {
      await database.close();
      await created.drop();
    },
  };
}

/**
 * A PostgreSQL database as the version before migration `tag` left it (see upgradedSqlite):
 * `seed` writes on the migrated database, the records of `tag` and later are removed, `read`
 * gets it reopened with those migrations applied again.
 */
export async function upgradedPg<T>(
  tag: string,
  seed: (pool: PgDatabase["pool"]) => Promise<void>,
  read: (database: PgDatabase) => Promise<T>,
): Promise<T> {
  const pg = await freshPgDatabase();
  try {
    const { pool } = pg.database;
    await seed(pool);
    await pool.query("delete from drizzle.__drizzle_migrations where created_at >= $1", [
      migrationTime(PG_MIGRATIONS_FOLDER, tag),
    ]);
    const reopened = await openPgDatabase(pg.url);
    try {
      return await read(reopened);
    } finally {
      await reopened.close();
    }
  } finally {
    await pg.drop();
  }
}

/** Empties every table of the schema (between the tests of one file). */
export async function truncateAll(database: PgDatabase): Promise<void> {
  const { rows } = await database.pool.query<{ name: string }>(
    "select quote_ident(tablename) as name from pg_tables where schemaname = 'public'",
  );
  if (rows.length === 0) return;
  await database.db.execute(
    sql.raw(`truncate ${rows.map((r) => r.name).join(", ")} restart identity cascade`),
  );
}

/**
 * For a file of tests of several writers at once: a fresh database (`database`), and `count`
 * more pools on it, each a "process" of its own (its own server connections), so that the
 * database, not the event loop, decides who goes first. Emptied before each test.
 */
export function pgWithPools(count: number, maxConnections: number) {
  const h = {} as {
    pg: Awaited<ReturnType<typeof freshPgDatabase>>;
    database: PgDatabase;
    pools: PgDatabase[];
  };
  beforeAll(async () => {
    h.pg = await freshPgDatabase();
    h.database = h.pg.database;
    h.pools = await Promise.all(
      Array.from({ length: count }, () => openPgDatabase(h.pg.url, { maxConnections })),
    );
  });
  afterAll(async () => {
    await Promise.all((h.pools ?? []).map((p) => p.close()));
    await h.pg?.drop();
  });
  beforeEach(async () => {
    await truncateAll(h.database);
  });
  return h;
}
