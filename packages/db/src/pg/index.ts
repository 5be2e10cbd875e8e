export type { OpenPgDatabaseOptions, PgDatabase, PgDb } from "./connection";
export { hasLooprunTables, openPgDatabase, PG_MIGRATIONS_FOLDER } from "./connection";
export { isPgUnavailable, isPgUniqueViolation, pgErrorCode } from "./pg-errors";
export { PgRunRepository } from "./pg-run-repository";
export { PgRunStore } from "./pg-run-store";
