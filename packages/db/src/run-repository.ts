import {
  ACTIVE_STATUSES,
  budgetSnapshot,
  type EditedPlan,
  type EventRecord,
  type FailurePattern,
  type IterationRecord,
  RunAlreadyActiveError,
  type RunRecord,
  type RunSpec,
  type RunStatus,
  type SessionRecord,
} from "@looprun/core";
import type BetterSqlite3 from "better-sqlite3";
import { and, asc, desc, eq, inArray, lt, type SQL, sql } from "drizzle-orm";
import { approvePlan, rejectApproval, replyToQuestion } from "./approvals";
import {
  iterationSnapshot,
  listPhaseArtifacts,
  listSnapshotRefs,
  runChange,
} from "./artifact-queries";
import type { Db } from "./connection";
import {
  type ConvergenceStats,
  type ConvergenceStatsFilter,
  convergenceStats,
} from "./convergence-stats";
import { readEvents } from "./event-log";
import { listPatterns, type PatternFilter } from "./failure-patterns";
import { IDEMPOTENCY_TTL_MS } from "./idempotency";
import { liveRuns } from "./live-queries";
import { type MetricsReader, SqliteMetricsReader } from "./metrics-reader";
import { sqliteClient } from "./prepared";
import {
  appendRunQueued,
  ensureSession,
  insertQueuedRun,
  sessionWorkspace,
} from "./queued-run-writes";
import {
  type ReviewArtifactRow,
  type ToolCallRow,
  toIterationRecord,
  toRunRecord,
  toSessionRecord,
} from "./records";
import type { RunRepositoryPort } from "./repository";
import { SqliteRetention } from "./retention";
import { recordRollback } from "./rollbacks";
import { idempotencyKeys, iterations, reviewArtifacts, runs, sessions, toolCalls } from "./schema";
import { finalizeStop, requestStop, type StopRequest } from "./stop-requests";
import { type ToolStats, type ToolStatsFilter, toolStats } from "./tool-stats";
import {
  type HoldRequest,
  type HoldResult,
  holdWorkspace,
  releaseWorkspace,
} from "./workspace-holds";

export interface NewRun {
  id: string;
  sessionId: string;
  /** The session's workspace, used when the session is new. */
  sessionWorkspace: string;
  workspace: string;
  spec: RunSpec;
  createdAt: number;
  /** With a key, a repeated submit (same key, same `requestHash`) returns the first run. */
  idempotency?: { key: string; requestHash: string };
  /**
   * `workspace` is the one a new session of this id gets, taken for the session's own without
   * looking first: when the session exists with another workspace, nothing is stored and
   * `SessionWorkspaceMismatchError` is thrown (the caller then looks the session's up).
   */
  workspaceGuessed?: boolean;
}

/** The session exists with another workspace than the one guessed for it (see `NewRun`). */
export class SessionWorkspaceMismatchError extends Error {
  override readonly name = "SessionWorkspaceMismatchError";
  constructor(readonly sessionId: string) {
    super(`session ${sessionId} has another workspace than the one guessed`);
  }
}

/** The key was used before with another body. */
export class IdempotencyConflictError extends Error {
  override readonly name = "IdempotencyConflictError";
  constructor(readonly key: string) {
    super(`Idempotency-Key ${key} was used with a different request`);
  }
}

export interface RunFilter {
  sessionId?: string;
  status?: RunStatus;
  /** Exclusive: the id of the last item of the previous page. */
  cursor?: string;
  limit: number;
}

export type { StopRequest };

const active = [...ACTIVE_STATUSES];

function isUniqueViolation(error: unknown): boolean {
  return (
    typeof error === "object" &&
    error !== null &&
    "code" in error &&
    (error as { code: unknown }).code === "SQLITE_CONSTRAINT_UNIQUE"
  );
}

/**
 * What the API reads and writes on SQLite: runs as a client sees them. Synchronous (the API's
 * write batcher runs `createRun` inside its group-commit transaction).
 */
export class RunRepository implements RunRepositoryPort {
  readonly retention: SqliteRetention;
  /**
   * `createRun`'s transaction, made once: better-sqlite3 wraps a function for each variant
   * (deferred, immediate…) at every `transaction()`, as drizzle's `transaction` does per call.
   * Inside the API's group commit it runs as a savepoint.
   */
  private readonly createRunTransaction: BetterSqlite3.Transaction<
    (input: NewRun) => RunRecord & { replayed?: boolean }
  >;

  constructor(private readonly db: Db) {
    this.retention = new SqliteRetention(db);
    this.createRunTransaction = sqliteClient(db).transaction((input: NewRun) =>
      this.insertRun(input),
    );
  }

  /**
   * Stores a queued run (and its session). Throws `RunAlreadyActiveError` when the session is
   * busy, `IdempotencyConflictError` when the key came with another body. `replayed` is true
   * when the key had already created this run.
   */
  createRun(input: NewRun): RunRecord & { replayed?: boolean } {
    try {
      return this.createRunTransaction.immediate(input);
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      const activeRun = this.activeRunOf(input.sessionId);
      if (!activeRun) throw error;
      throw new RunAlreadyActiveError(input.sessionId, activeRun);
    }
  }

  /** `createRun`'s writes, inside its transaction. */
  private insertRun(input: NewRun): RunRecord & { replayed?: boolean } {
    if (input.idempotency) {
      this.db
        .delete(idempotencyKeys)
        .where(lt(idempotencyKeys.createdAt, input.createdAt - IDEMPOTENCY_TTL_MS))
        .run();
      const seen = this.db
        .select()
        .from(idempotencyKeys)
        .where(eq(idempotencyKeys.key, input.idempotency.key))
        .get();
      if (seen) {
        if (seen.requestHash !== input.idempotency.requestHash)
          throw new IdempotencyConflictError(seen.key);
        const first = this.db.select().from(runs).where(eq(runs.id, seen.runId)).get();
        if (first) return { ...toRunRecord(first), replayed: true };
      }
    }
    if (input.workspaceGuessed) {
      const stored = sessionWorkspace(this.db, input.sessionId);
      if (stored !== null && stored !== input.workspace) {
        throw new SessionWorkspaceMismatchError(input.sessionId);
      }
    }
    // Prepared once (queued-run-writes.ts): this is the API's hottest write.
    ensureSession(this.db, input.sessionId, input.sessionWorkspace, input.createdAt);
    const run = toRunRecord(insertQueuedRun(this.db, input));
    if (input.idempotency) {
      this.db
        .insert(idempotencyKeys)
        .values({
          key: input.idempotency.key,
          requestHash: input.idempotency.requestHash,
          runId: run.id,
          createdAt: input.createdAt,
        })
        .onConflictDoUpdate({
          target: idempotencyKeys.key,
          set: {
            runId: run.id,
            requestHash: input.idempotency.requestHash,
            createdAt: input.createdAt,
          },
        })
        .run();
    }
    appendRunQueued(
      this.db,
      run.id,
      { sessionId: run.sessionId, budget: budgetSnapshot(run, input.createdAt) },
      input.createdAt,
    );
    return run;
  }

  /** Undoes `createRun` when the run could not be enqueued (the client got an error). */
  deleteRun(runId: string): boolean {
    return this.db.transaction(
      (tx) => {
        const row = tx.select().from(runs).where(eq(runs.id, runId)).get();
        if (!row) return true;
        if (row.epoch !== 0) return false;
        tx.delete(runs).where(eq(runs.id, runId)).run();
        const others = tx
          .select({ id: runs.id })
          .from(runs)
          .where(eq(runs.sessionId, row.sessionId))
          .limit(1)
          .get();
        if (!others) tx.delete(sessions).where(eq(sessions.id, row.sessionId)).run();
        return true;
      },
      { behavior: "immediate" },
    );
  }

  activeRunOf(sessionId: string): string | null {
    const row = this.db
      .select({ id: runs.id })
      .from(runs)
      .where(and(eq(runs.sessionId, sessionId), inArray(runs.status, active)))
      .get();
    return row?.id ?? null;
  }

  /** Runs that should have a job in the queue (awaiting approval ones wait for a person). */
  listUnfinishedRuns(createdBefore: number): RunRecord[] {
    return this.db
      .select()
      .from(runs)
      .where(
        and(
          inArray(runs.status, ["queued", "running", "stopping"]),
          lt(runs.createdAt, createdBefore),
        ),
      )
      .all()
      .map(toRunRecord);
  }

  getRun(runId: string): RunRecord | null {
    const row = this.db.select().from(runs).where(eq(runs.id, runId)).get();
    return row ? toRunRecord(row) : null;
  }

  /** Newest first (ids are ULIDs, so they sort by creation time). */
  listRuns(filter: RunFilter): { items: RunRecord[]; nextCursor: string | null } {
    const where: SQL[] = [];
    if (filter.sessionId !== undefined) where.push(eq(runs.sessionId, filter.sessionId));
    if (filter.status !== undefined) {
      // With a session as well, SQLite picks the (status, id) index and walks every run of that
      // status (O(history)); a session has few runs: the unary + keeps status out of the choice.
      where.push(
        filter.sessionId === undefined
          ? eq(runs.status, filter.status)
          : sql`+${runs.status} = ${filter.status}`,
      );
    }
    if (filter.cursor !== undefined) where.push(lt(runs.id, filter.cursor));
    const rows = this.db
      .select()
      .from(runs)
      .where(and(...where))
      .orderBy(desc(runs.id))
      .limit(filter.limit + 1)
      .all();
    const items = rows.slice(0, filter.limit).map(toRunRecord);
    const nextCursor = rows.length > filter.limit ? (items.at(-1)?.id ?? null) : null;
    return { items, nextCursor };
  }

  listIterations(runId: string): IterationRecord[] {
    return this.db
      .select()
      .from(iterations)
      .where(eq(iterations.runId, runId))
      .orderBy(asc(iterations.n), asc(iterations.attempt))
      .all()
      .map(toIterationRecord);
  }

  listEvents(runId: string, after: number, limit: number): EventRecord[] {
    return readEvents(this.db, runId, after, limit);
  }

  listToolCalls(runId: string): ToolCallRow[] {
    return this.db
      .select()
      .from(toolCalls)
      .where(eq(toolCalls.runId, runId))
      .orderBy(asc(toolCalls.seq))
      .all();
  }

  toolStats(filter: ToolStatsFilter): ToolStats {
    return toolStats(this.db, filter);
  }

  /** What runs learned (learning across runs): see failure-patterns.ts. */
  failurePatterns(filter: PatternFilter): FailurePattern[] {
    return listPatterns(this.db, filter);
  }

  /** See `liveRuns`: what the API's live run list polls. */
  liveRuns(ids: readonly string[], sinceId: string): RunRecord[] {
    return liveRuns(this.db, ids, sinceId);
  }

  /** A reader for the Prometheus metrics (see metrics-reader.ts). */
  metricsReader(): MetricsReader {
    return new SqliteMetricsReader(this.db);
  }

  /** Convergence across the runs created in a time window (`GET /api/stats`). */
  convergenceStats(filter: ConvergenceStatsFilter): ConvergenceStats {
    return convergenceStats(this.db, filter);
  }

  /** A run's snapshots, its change and its pipeline phase artifacts (see artifact-queries.ts). */
  readonly artifacts = {
    phases: (runId: string) => listPhaseArtifacts(this.db, runId),
    snapshots: (runId: string) => listSnapshotRefs(this.db, runId),
    iterationSnapshot: (runId: string, n: number) => iterationSnapshot(this.db, runId, n),
    change: (runId: string) => runChange(this.db, runId),
  };

  listReviews(runId: string): ReviewArtifactRow[] {
    return this.db
      .select()
      .from(reviewArtifacts)
      .where(eq(reviewArtifacts.runId, runId))
      .orderBy(asc(reviewArtifacts.iteration), asc(reviewArtifacts.createdAt))
      .all();
  }

  /** The workspace of a session (null when there is none), without reading its runs. */
  sessionWorkspace(sessionId: string): string | null {
    return sessionWorkspace(this.db, sessionId);
  }

  getSession(sessionId: string): { session: SessionRecord; runs: RunRecord[] } | null {
    const row = this.db.select().from(sessions).where(eq(sessions.id, sessionId)).get();
    if (!row) return null;
    const list = this.db
      .select()
      .from(runs)
      .where(eq(runs.sessionId, sessionId))
      .orderBy(desc(runs.id))
      .all()
      .map(toRunRecord);
    return { session: toSessionRecord(row), runs: list };
  }

  /** Records a rollback of the run's workspace (`rollback_applied`). */
  recordRollback(runId: string, data: Record<string, unknown>, now: number): void {
    recordRollback(this.db, runId, data, now);
  }

  holdWorkspace(req: HoldRequest): HoldResult {
    return holdWorkspace(this.db, req);
  }

  releaseWorkspace(req: Pick<HoldRequest, "workspace" | "sessionId" | "runId">): void {
    releaseWorkspace(this.db, req);
  }

  /** A person's answers to a run that waits in `awaiting_approval` (see approvals.ts). */
  readonly approvals = {
    approve: (runId: string, now: number, edited: EditedPlan | null) =>
      approvePlan(this.db, runId, now, edited),
    reply: (runId: string, now: number, message: string) =>
      replyToQuestion(this.db, runId, now, message),
    reject: (runId: string, now: number, reason: string) =>
      rejectApproval(this.db, runId, now, reason),
  };

  /** Marks the run `stopping` (idempotent); a finished run is left as it is. */
  requestStop(runId: string, now: number): StopRequest {
    return requestStop(this.db, runId, now);
  }

  /**
   * Ends a `stopping` run that no worker holds (its job was removed or is gone). Bumps the
   * epoch so that no earlier holder can write to it again.
   */
  finalizeStop(runId: string, now: number): RunRecord | null {
    return finalizeStop(this.db, runId, now);
  }
}
