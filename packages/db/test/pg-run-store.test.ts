import type { PgDatabase } from "@looprun/db/pg";
import { afterAll, beforeAll } from "vitest";
import { failurePatternSuite } from "./failure-patterns-suite";
import { freshPgDatabase, truncateAll } from "./pg-support";
import { runStoreSuite } from "./run-store-suite";
import { pgHarness } from "./store-harness";

let pg: Awaited<ReturnType<typeof freshPgDatabase>> | undefined;
let database: PgDatabase;
beforeAll(async () => {
  pg = await freshPgDatabase();
  database = pg.database;
});
afterAll(async () => {
  await pg?.drop();
});

// The behaviour every store shares (sqlite-run-store.test.ts runs it on SQLite); one database
// for the file, emptied before each test.
runStoreSuite("PostgreSQL", async () => {
  await truncateAll(database);
  return pgHarness(database);
});

failurePatternSuite("PostgreSQL", async () => {
  await truncateAll(database);
  return pgHarness(database);
});
