export type { Database, Db, OpenDatabaseOptions } from "./connection";
export { MIGRATIONS_FOLDER, openDatabase } from "./connection";
export type { IterationSample } from "./live-queries";
export type { ReviewArtifactRow, ToolCallRow } from "./records";
export type { NewRun, RunFilter, StopRequest } from "./run-repository";
export { IdempotencyConflictError, RunRepository } from "./run-repository";
export { SqliteRunStore } from "./sqlite-run-store";
export type { ToolStat, ToolStats, ToolStatsFilter } from "./tool-stats";
export { toolStats } from "./tool-stats";
