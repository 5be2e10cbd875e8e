import {
  ACTIVE_STATUSES,
  budgetSnapshot,
  EMPTY_METRICS,
  type EventRecord,
  type FailurePattern,
  type IterationRecord,
  RunAlreadyActiveError,
  type RunRecord,
  type SessionRecord,
} from "@looprun/core";
import { and, asc, desc, eq, gt, inArray, lt, type SQL, sql } from "drizzle-orm";
import type { PatternFilter } from "../failure-patterns";
import {
  type ReviewArtifactRow,
  type ToolCallRow,
  toEventRecord,
  toIterationRecord,
  toRunRecord,
  toSessionRecord,
} from "../records";
import { IdempotencyConflictError, type NewRun, type RunFilter } from "../run-repository";
import type { StopRequest } from "../stop-requests";
import type { PgDb } from "./connection";
import { appendEvents } from "./event-log";
import { listPatterns } from "./failure-patterns";
import { withoutNul } from "./nul-bytes";
import { isPgUniqueViolation } from "./pg-errors";
import {
  events,
  idempotencyKeys,
  iterations,
  reviewArtifacts,
  runs,
  sessions,
  toolCalls,
} from "./schema";
import { finalizeStop, requestStop } from "./stop-requests";

/** Keys are remembered this long (as in ../run-repository.ts). */
const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

const active = [...ACTIVE_STATUSES];

/**
 * The API's reads and writes of ../run-repository.ts on PostgreSQL, asynchronous: the first
 * part of the async repository port (submit, stop, lists, history). Same results, same errors.
 */
export class PgRunRepository {
  constructor(private readonly db: PgDb) {}

  /**
   * Stores a queued run (and its session). Throws `RunAlreadyActiveError` when the session is
   * busy — the partial unique index decides, also between API processes — and
   * `IdempotencyConflictError` when the key came with another body.
   */
  async createRun(newRun: NewRun): Promise<RunRecord & { replayed?: boolean }> {
    const input = withoutNul(newRun);
    try {
      return await this.db.transaction(async (tx) => {
        if (input.idempotency) {
          // Two submits with one key: the second waits for the first and replays its run.
          await tx.execute(
            sql`select pg_advisory_xact_lock(hashtext(${`idempotency:${input.idempotency.key}`}))`,
          );
          await tx
            .delete(idempotencyKeys)
            .where(lt(idempotencyKeys.createdAt, input.createdAt - IDEMPOTENCY_TTL_MS));
          const [seen] = await tx
            .select()
            .from(idempotencyKeys)
            .where(eq(idempotencyKeys.key, input.idempotency.key));
          if (seen) {
            if (seen.requestHash !== input.idempotency.requestHash)
              throw new IdempotencyConflictError(seen.key);
            const [first] = await tx.select().from(runs).where(eq(runs.id, seen.runId));
            if (first) return { ...toRunRecord(first), replayed: true };
          }
        }
        await tx
          .insert(sessions)
          .values({
            id: input.sessionId,
            workspace: input.sessionWorkspace,
            createdAt: input.createdAt,
          })
          .onConflictDoNothing({ target: sessions.id });
        const [row] = await tx
          .insert(runs)
          .values({
            id: input.id,
            sessionId: input.sessionId,
            task: input.spec.task,
            spec: input.spec,
            workspace: input.workspace,
            status: "queued",
            metrics: EMPTY_METRICS,
            progress: "queued",
            createdAt: input.createdAt,
          })
          .returning();
        if (!row) throw new Error(`run ${input.id} was not stored`);
        const run = toRunRecord(row);
        if (input.idempotency) {
          await tx
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
            });
        }
        await appendEvents(
          tx,
          run.id,
          [
            {
              type: "run_queued",
              data: { sessionId: run.sessionId, budget: budgetSnapshot(run, input.createdAt) },
            },
          ],
          input.createdAt,
        );
        return run;
      });
    } catch (error) {
      if (!isPgUniqueViolation(error, "runs_one_active_per_session")) throw error;
      const activeRun = await this.activeRunOf(input.sessionId);
      if (!activeRun) throw error;
      throw new RunAlreadyActiveError(input.sessionId, activeRun);
    }
  }

  /** Undoes `createRun` when the run could not be enqueued (the client got an error). */
  async deleteRun(runId: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      const [row] = await tx.select().from(runs).where(eq(runs.id, runId)).for("update");
      if (!row) return;
      await tx.delete(runs).where(eq(runs.id, runId));
      const [other] = await tx
        .select({ id: runs.id })
        .from(runs)
        .where(eq(runs.sessionId, row.sessionId))
        .limit(1);
      if (!other) await tx.delete(sessions).where(eq(sessions.id, row.sessionId));
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

  async listEvents(runId: string, after: number, limit: number): Promise<EventRecord[]> {
    const rows = await this.db
      .select()
      .from(events)
      .where(and(eq(events.runId, runId), gt(events.seq, after)))
      .orderBy(asc(events.seq))
      .limit(limit);
    return rows.map(toEventRecord);
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
    const [row] = await this.db.select().from(sessions).where(eq(sessions.id, sessionId));
    if (!row) return null;
    const list = await this.db
      .select()
      .from(runs)
      .where(eq(runs.sessionId, sessionId))
      .orderBy(desc(runs.id));
    return { session: toSessionRecord(row), runs: list.map(toRunRecord) };
  }

  /** Marks the run `stopping` (idempotent); a finished run is left as it is. */
  requestStop(runId: string, now: number): Promise<StopRequest> {
    return requestStop(this.db, runId, now);
  }

  /** Ends a `stopping` run that no worker holds, bumping its epoch. */
  finalizeStop(runId: string, now: number): Promise<RunRecord | null> {
    return finalizeStop(this.db, runId, now);
  }
}
