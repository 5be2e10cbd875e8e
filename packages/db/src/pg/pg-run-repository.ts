import {
  ACTIVE_STATUSES,
  budgetSnapshot,
  type EditedPlan,
  type EventRecord,
  type FailurePattern,
  type IterationRecord,
  type RunRecord,
  type SessionRecord,
} from "@looprun/core";
import { and, asc, desc, eq, inArray, lt, type SQL } from "drizzle-orm";
import type { ConvergenceStats, ConvergenceStatsFilter } from "../convergence-stats";
import type { PatternFilter } from "../failure-patterns";
import type { MetricsReader } from "../metrics-reader";
import {
  type ReviewArtifactRow,
  type ToolCallRow,
  toIterationRecord,
  toRunRecord,
  toSessionRecord,
} from "../records";
import type { RunRepositoryPort } from "../repository";
import type { NewRun, RunFilter } from "../run-repository";
import type { StopRequest } from "../stop-requests";
import type { ToolStats, ToolStatsFilter } from "../tool-stats";
import type { HoldRequest, HoldResult } from "../workspace-holds";
import { approvePlan, rejectApproval, replyToQuestion } from "./approvals";
import {
  iterationSnapshot,
  listPhaseArtifacts,
  listSnapshotRefs,
  runChange,
} from "./artifact-queries";
import { type PgDb, poolOf } from "./connection";
import { appendEvents, readEvents } from "./event-log";
import { listPatterns } from "./failure-patterns";
import { liveRuns } from "./live-queries";
import { PgMetricsReader } from "./metrics-reader";
import { withoutNul } from "./nul-bytes";
import { isPgUnavailable } from "./pg-errors";
import { PgRetention } from "./retention";
import { iterations, reviewArtifacts, runs, sessions, toolCalls } from "./schema";
import { convergenceStats, toolStats } from "./stats";
import { finalizeStop, requestStop } from "./stop-requests";
import { createRun } from "./submit";
import { holdWorkspace, releaseWorkspace } from "./workspace-holds";

const active = [...ACTIVE_STATUSES];

/**
 * The API's reads and writes (the `RunRepositoryPort`) on PostgreSQL, asynchronous: the same
 * answers as ../run-repository.ts on SQLite — ordering, paging cursors, statistics, errors.
 */
export class PgRunRepository implements RunRepositoryPort {
  readonly retention: PgRetention;

  constructor(private readonly db: PgDb) {
    this.retention = new PgRetention(db);
  }

  isUnavailable(error: unknown): boolean {
    return isPgUnavailable(error);
  }

  /**
   * Stores a queued run (and its session). Throws `RunAlreadyActiveError` when the session is
   * busy — the partial unique index decides, also between API processes — and
   * `IdempotencyConflictError` when the key came with another body (see submit.ts).
   */
  createRun(input: NewRun): Promise<RunRecord & { replayed?: boolean }> {
    return createRun(this.db, input);
  }

  /** Undoes `createRun` when the run could not be enqueued (the client got an error). */
  async deleteRun(runId: string): Promise<boolean> {
    return await this.db.transaction(async (tx) => {
      const [row] = await tx.select().from(runs).where(eq(runs.id, runId)).for("update");
      if (!row) return true;
      if (row.epoch !== 0) return false;
      await tx.delete(runs).where(eq(runs.id, runId));
      const [other] = await tx
        .select({ id: runs.id })
        .from(runs)
        .where(eq(runs.sessionId, row.sessionId))
        .limit(1);
      if (!other) await tx.delete(sessions).where(eq(sessions.id, row.sessionId));
      return true;
    });
  }

  async activeRunOf(sessionId: string): Promise<string | null> {
    const [row] = await this.db
      .select({ id: runs.id })
      .from(runs)
      .where(and(eq(runs.sessionId, sessionId), inArray(runs.status, active)));
    return row?.id ?? null;
  }

  /** Runs that should have a job in the queue (awaiting approval ones wait for a person). */
  async listUnfinishedRuns(createdBefore: number): Promise<RunRecord[]> {
    const rows = await this.db
      .select()
      .from(runs)
      .where(
        and(
          inArray(runs.status, ["queued", "running", "stopping"]),
          lt(runs.createdAt, createdBefore),
        ),
      );
    return rows.map(toRunRecord);
  }

  /** What runs learned (learning across runs): see ../failure-patterns.ts. */
  async failurePatterns(filter: PatternFilter): Promise<FailurePattern[]> {
    return listPatterns(this.db, filter);
  }

  async getRun(runId: string): Promise<RunRecord | null> {
    // An id from a URL: a NUL byte cannot be in a stored id, and a query with one fails.
    if (runId.includes("\0")) return null;
    const [row] = await this.db.select().from(runs).where(eq(runs.id, runId));
    return row ? toRunRecord(row) : null;
  }

  /** Newest first (ids are ULIDs, in byte order: the column's collation is "C"). */
  async listRuns(filter: RunFilter): Promise<{ items: RunRecord[]; nextCursor: string | null }> {
    const where: SQL[] = [];
    if (filter.sessionId !== undefined) where.push(eq(runs.sessionId, filter.sessionId));
    if (filter.status !== undefined) where.push(eq(runs.status, filter.status));
    if (filter.cursor !== undefined) where.push(lt(runs.id, filter.cursor));
    const rows = await this.db
      .select()
      .from(runs)
      .where(and(...where))
      .orderBy(desc(runs.id))
      .limit(filter.limit + 1);
    const items = rows.slice(0, filter.limit).map(toRunRecord);
    const nextCursor = rows.length > filter.limit ? (items.at(-1)?.id ?? null) : null;
    return { items, nextCursor };
  }

  async listIterations(runId: string): Promise<IterationRecord[]> {
    const rows = await this.db
      .select()
      .from(iterations)
      .where(eq(iterations.runId, runId))
      .orderBy(asc(iterations.n), asc(iterations.attempt));
    return rows.map(toIterationRecord);
  }

  /** `after` may exceed what `seq` (an `integer`) holds: PostgreSQL would refuse the parameter. */
  listEvents(runId: string, after: number, limit: number): Promise<EventRecord[]> {
    return readEvents(this.db, runId, after, limit);
  }

  async listToolCalls(runId: string): Promise<ToolCallRow[]> {
    return this.db
      .select()
      .from(toolCalls)
      .where(eq(toolCalls.runId, runId))
      .orderBy(asc(toolCalls.seq));
  }

  async listReviews(runId: string): Promise<ReviewArtifactRow[]> {
    return this.db
      .select()
      .from(reviewArtifacts)
      .where(eq(reviewArtifacts.runId, runId))
      .orderBy(asc(reviewArtifacts.iteration), asc(reviewArtifacts.createdAt));
  }

  async getSession(
    sessionId: string,
  ): Promise<{ session: SessionRecord; runs: RunRecord[] } | null> {
    if (sessionId.includes("\0")) return null;
    const [row] = await this.db.select().from(sessions).where(eq(sessions.id, sessionId));
    if (!row) return null;
    const list = await this.db
      .select()
      .from(runs)
      .where(eq(runs.sessionId, sessionId))
      .orderBy(desc(runs.id));
    return { session: toSessionRecord(row), runs: list.map(toRunRecord) };
  }

  toolStats(filter: ToolStatsFilter): Promise<ToolStats> {
    return toolStats(this.db, filter);
  }

  /** See ../live-queries.ts: what the API's live run list polls. */
  liveRuns(ids: readonly string[], sinceId: string): Promise<RunRecord[]> {
    return liveRuns(this.db, ids, sinceId);
  }

  /** A reader for the Prometheus metrics (see metrics-reader.ts). */
  metricsReader(): MetricsReader {
    return new PgMetricsReader(this.db);
  }

  /** Convergence across the runs created in a time window (`GET /api/stats`). */
  convergenceStats(filter: ConvergenceStatsFilter): Promise<ConvergenceStats> {
    return convergenceStats(this.db, filter);
  }

  /** A run's snapshots, its change and its pipeline phase artifacts. */
  readonly artifacts = {
    phases: (runId: string) => listPhaseArtifacts(this.db, runId),
    snapshots: (runId: string) => listSnapshotRefs(this.db, runId),
    iterationSnapshot: (runId: string, n: number) => iterationSnapshot(this.db, runId, n),
    change: (runId: string) => runChange(this.db, runId),
  };

  /**
   * The workspace of a session (null when there is none), without reading its runs: a named
   * statement (every submit that names no workspace asks it).
   */
  async sessionWorkspace(sessionId: string): Promise<string | null> {
    const { rows } = await poolOf(this.db).query<[workspace: string]>({
      name: "looprun_session_workspace",
      text: "select workspace from sessions where id = $1",
      values: [sessionId],
      rowMode: "array",
    });
    return rows[0]?.[0] ?? null;
  }

  holdWorkspace(req: HoldRequest): Promise<HoldResult> {
    return holdWorkspace(this.db, req);
  }

  releaseWorkspace(req: Pick<HoldRequest, "workspace" | "sessionId" | "runId">): Promise<void> {
    return releaseWorkspace(this.db, req);
  }

  /** Records a rollback of the run's workspace (`rollback_applied`). */
  async recordRollback(runId: string, data: Record<string, unknown>, now: number): Promise<void> {
    await this.db.transaction(async (tx) => {
      const [row] = await tx.select().from(runs).where(eq(runs.id, runId)).for("update");
      if (!row) return;
      const budget = budgetSnapshot(toRunRecord(row), now);
      await appendEvents(
        tx,
        runId,
        [{ type: "rollback_applied", data: withoutNul({ ...data, budget }) }],
        now,
      );
    });
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
  async requestStop(runId: string, now: number): Promise<StopRequest> {
    if (runId.includes("\0")) return { kind: "not_found" };
    return requestStop(this.db, runId, now);
  }

  /** Ends a `stopping` run that no worker holds, bumping its epoch. */
  finalizeStop(runId: string, now: number): Promise<RunRecord | null> {
    return finalizeStop(this.db, runId, now);
  }
}
