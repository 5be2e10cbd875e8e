import { openPgDatabase, type PgDatabase } from "@looprun/db/pg";
import { sql } from "drizzle-orm";
import { inject } from "vitest";
import { createDatabase } from "../../../tests/support/postgres";

/**
 * The superuser URL of the test run's PostgreSQL (global-setup.ts). Without one the
 * PostgreSQL suites fail with the reason — they are never skipped in silence.
 */
export function postgresAdminUrl(): string {
  const url = inject("postgresUrl");
  if (!url)
    throw new Error(`PostgreSQL is not available for the tests: ${inject("postgresError")}`);
  return url;
}

/** A new database on the test cluster, migrated; `drop` closes and removes it. */
export async function freshPgDatabase(): Promise<{
  url: string;
  database: PgDatabase;
  drop(): Promise<void>;
}> {
  const created = await createDatabase(postgresAdminUrl());
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
