import { openPgDatabase, type PgDatabase } from "@looprun/db/pg";
import { sql } from "drizzle-orm";
import { freshPostgresDatabase } from "../../../tests/support/pg-test-database";

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
