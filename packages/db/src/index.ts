export type { ApprovalAnswer } from "./approvals";
export type { SnapshotRef } from "./artifact-queries";
export type { Database, Db, OpenDatabaseOptions } from "./connection";
export { MIGRATIONS_FOLDER, openDatabase } from "./connection";
export type { ConvergenceStats, ConvergenceStatsFilter } from "./convergence-stats";
export { convergenceStats } from "./convergence-stats";
export type { PatternFilter } from "./failure-patterns";
export { idempotencyKeyHash } from "./idempotency";
export type { IterationSample } from "./live-queries";
export type {
  FinishedIteration,
  MetricsRead,
  MetricsReader,
  ToolCallCount,
} from "./metrics-reader";
export type { OpenStorageOptions, Storage } from "./open-storage";
export { isLooprunDatabaseAt, isPostgresUrl, openStorage, redactUrl } from "./open-storage";
export type { ReviewArtifactRow, ToolCallRow } from "./records";
export type { MaybePromise, RunRepositoryPort } from "./repository";
export type { PrunableRun, RetentionPort } from "./retention";
export type { NewRun, RunFilter, StopRequest } from "./run-repository";
export {
  IdempotencyConflictError,
  RunRepository,
  SessionWorkspaceMismatchError,
} from "./run-repository";
export { SqliteRunStore } from "./sqlite-run-store";
export { StorageSettings } from "./storage-settings";
export type { ToolStat, ToolStats, ToolStatsFilter } from "./tool-stats";
export { toolStats } from "./tool-stats";
export type { DeferredSyncCommits } from "./wal-sync";
export { deferredSyncCommits } from "./wal-sync";
export type { HoldRequest, HoldResult } from "./workspace-holds";
