import type {
  EditedPlan,
  EventRecord,
  FailurePattern,
  IterationRecord,
  IterationSnapshot,
  PhaseArtifact,
  RunChange,
  RunRecord,
  SessionRecord,
} from "@looprun/core";
import type { ApprovalAnswer } from "./approvals";
import type { SnapshotRef } from "./artifact-queries";
import type { ConvergenceStats, ConvergenceStatsFilter } from "./convergence-stats";
import type { PatternFilter } from "./failure-patterns";
import type { MetricsReader } from "./metrics-reader";
import type { ReviewArtifactRow, ToolCallRow } from "./records";
import type { RetentionPort } from "./retention";
import type { NewRun, RunFilter } from "./run-repository";
import type { StopRequest } from "./stop-requests";
import type { ToolStats, ToolStatsFilter } from "./tool-stats";
import type { HoldRequest, HoldResult } from "./workspace-holds";

/**
 * A value now (SQLite: better-sqlite3 answers synchronously, and the API's submit path stays
 * free of promise overhead) or later (PostgreSQL). Callers `await` either.
 */
export type MaybePromise<T> = T | Promise<T>;

/**
 * What the API reads and writes — runs as a client sees them —, whatever the engine:
 * `RunRepository` (SQLite) and `PgRunRepository` (PostgreSQL) give the same answers (ordering,
 * paging cursors, statistics, errors) to the same calls. Workers use the same port for their
 * reconciler. Errors: `createRun` throws `RunAlreadyActiveError` and `IdempotencyConflictError`.
 */
export interface RunRepositoryPort {
  /**
   * Whether an error of this repository says the database is unreachable for now (PostgreSQL
   * restarting, a connection cut): the API answers 503 `unavailable` rather than 500.
   */
  isUnavailable?(error: unknown): boolean;
  createRun(input: NewRun): MaybePromise<RunRecord & { replayed?: boolean }>;
  /**
   * Takes back a run whose job could not be enqueued (and its session, when it has no other
   * run) — unless a worker claimed it meanwhile (the enqueue reached Redis after all, its
   * answer did not): that run is kept. Whether the run is gone (or never was).
   */
  deleteRun(runId: string): MaybePromise<boolean>;
  activeRunOf(sessionId: string): MaybePromise<string | null>;
  listUnfinishedRuns(createdBefore: number): MaybePromise<RunRecord[]>;
  getRun(runId: string): MaybePromise<RunRecord | null>;
  listRuns(filter: RunFilter): MaybePromise<{ items: RunRecord[]; nextCursor: string | null }>;
  listIterations(runId: string): MaybePromise<IterationRecord[]>;
  listEvents(runId: string, after: number, limit: number): MaybePromise<EventRecord[]>;
  listToolCalls(runId: string): MaybePromise<ToolCallRow[]>;
  listReviews(runId: string): MaybePromise<ReviewArtifactRow[]>;
  toolStats(filter: ToolStatsFilter): MaybePromise<ToolStats>;
  failurePatterns(filter: PatternFilter): MaybePromise<FailurePattern[]>;
  /** Every active run, the runs in `ids` and the runs created since `sinceId` (a ULID floor). */
  liveRuns(ids: readonly string[], sinceId: string): MaybePromise<RunRecord[]>;
  /** A new reader for the Prometheus metrics (it remembers what it has counted). */
  metricsReader(): MetricsReader;
  convergenceStats(filter: ConvergenceStatsFilter): MaybePromise<ConvergenceStats>;
  readonly artifacts: {
    phases(runId: string): MaybePromise<PhaseArtifact[]>;
    snapshots(runId: string): MaybePromise<SnapshotRef[]>;
    iterationSnapshot(runId: string, n: number): MaybePromise<IterationSnapshot | null>;
    change(runId: string): MaybePromise<RunChange | null>;
  };
  sessionWorkspace(sessionId: string): MaybePromise<string | null>;
  getSession(sessionId: string): MaybePromise<{ session: SessionRecord; runs: RunRecord[] } | null>;
  recordRollback(runId: string, data: Record<string, unknown>, now: number): MaybePromise<void>;
  /** A rollback's hold of a workspace (see workspace-holds.ts); released when it is done. */
  holdWorkspace(req: HoldRequest): MaybePromise<HoldResult>;
  releaseWorkspace(req: Pick<HoldRequest, "workspace" | "sessionId" | "runId">): MaybePromise<void>;
  readonly approvals: {
    approve(runId: string, now: number, edited: EditedPlan | null): MaybePromise<ApprovalAnswer>;
    reply(runId: string, now: number, message: string): MaybePromise<ApprovalAnswer>;
    reject(runId: string, now: number, reason: string): MaybePromise<ApprovalAnswer>;
  };
  requestStop(runId: string, now: number): MaybePromise<StopRequest>;
  finalizeStop(runId: string, now: number): MaybePromise<RunRecord | null>;
  /** The deletion of runs older than the retention (the workers', see retention.ts). */
  readonly retention: RetentionPort;
}
