import { type RunRecords, TERMINAL_STATUSES } from "@looprun/core";
import { and, asc, gt, inArray, lt, ne, type SQL, type SQLWrapper, sql } from "drizzle-orm";
import type { Db } from "./connection";
import { IDEMPOTENCY_TTL_MS } from "./idempotency";
import type { MaybePromise } from "./repository";
import {
  idempotencyKeys,
  iterationSnapshots,
  iterations,
  runChanges,
  runs,
  toolCalls,
  workspaceHolds,
} from "./schema";
import { ulidFloor } from "./ulid-floor";

/**
 * Retention (`LOOPRUN_RETENTION_DAYS`): finished runs older than the retention are deleted with
 * everything recorded of them — iterations, events, tool calls, reviews, snapshot rows, the
 * run's change, phase artifacts, idempotency keys (all `ON DELETE CASCADE`) — and the hourly
 * statistics drop them (their delete triggers). Sessions stay, and so do the failure patterns
 * (what runs learned outlives them).
 */

/** A finished run that retention may delete, and where its snapshots are. */
export interface PrunableRun {
  id: string;
  sessionId: string;
  workspace: string;
}

export interface RetentionPort {
  /**
   * Finished runs that ended before `finishedBefore`, by id (oldest first), after `afterId`
   * (`""`: from the first).
   */
  candidates(finishedBefore: number, afterId: string, limit: number): MaybePromise<PrunableRun[]>;
  /**
   * Deletes those of `ids` that still ended before `finishedBefore` and that no rollback holds
   * at `now` (its restore reads the run's snapshots); returns the ids deleted.
   */
  deleteRuns(ids: readonly string[], finishedBefore: number, now: number): MaybePromise<string[]>;
  /**
   * Those of `runIds` the database has, and every snapshot (commit id) recorded of them: what
   * `looprun gc` keeps of the runs its refs name (see collectSnapshotGarbage in @looprun/core).
   */
  snapshotsOfRuns(runIds: readonly string[]): MaybePromise<RunRecords>;
}

/** The rows of the runs' snapshot ids, from either store, as one list without repeats. */
export function runSnapshotsOf(
  runRows: readonly { id: string; baseline: string | null; latest: string | null }[],
  idRows: readonly { a: string; b: string }[],
): RunRecords {
  const ids = new Set<string>();
  for (const run of runRows) {
    if (run.baseline !== null) ids.add(run.baseline);
    if (run.latest !== null) ids.add(run.latest);
  }
  for (const row of idRows) ids.add(row.a).add(row.b);
  return { runIds: runRows.map((run) => run.id), snapshotIds: [...ids] };
}

const finished = [...TERMINAL_STATUSES];

/*
 * The conditions, on either store (drizzle renders the same column names for both; the
 * PostgreSQL queries of pg/retention.ts use them too).
 */

/**
 * Finished runs that ended before `finishedBefore`, after `afterId` by id. `status`: the
 * column as the query names it (SQLite's keeps the status index out of the choice, below).
 */
export function candidateConditions(
  finishedBefore: number,
  afterId: string,
  status: SQLWrapper = runs.status,
): SQL | undefined {
  return and(
    gt(runs.id, afterId),
    // A run that ended before the cut was made before it: its id is below the cut's floor,
    // which bounds the walk on the primary key.
    lt(runs.id, ulidFloor(finishedBefore)),
    inArray(status, finished),
    lt(runs.finishedAt, finishedBefore),
  );
}

/**
 * Those of `ids` still finished before `finishedBefore`, held by no rollback at `now`, and
 * whose `Idempotency-Key` (if any) is past its 24 hours: a client retrying its submit with the
 * key gets this run, not a new one (the key would go with the run).
 */
export function deletableConditions(
  ids: readonly string[],
  finishedBefore: number,
  now: number,
): SQL | undefined {
  return and(
    inArray(runs.id, [...ids]),
    inArray(runs.status, finished),
    lt(runs.finishedAt, finishedBefore),
    sql`not exists (select 1 from ${workspaceHolds} where ${workspaceHolds.runId} = ${runs.id} and ${workspaceHolds.expiresAt} > ${now})`,
    sql`not exists (select 1 from ${idempotencyKeys} where ${idempotencyKeys.runId} = ${runs.id} and ${idempotencyKeys.createdAt} >= ${now - IDEMPOTENCY_TTL_MS})`,
  );
}

export class SqliteRetention implements RetentionPort {
  constructor(private readonly db: Db) {}

  snapshotsOfRuns(runIds: readonly string[]): RunRecords {
    if (runIds.length === 0) return { runIds: [], snapshotIds: [] };
    const ids = [...runIds];
    const runRows = this.db
      .select({ id: runs.id, baseline: runs.baselineSnapshot, latest: runs.latestSnapshot })
      .from(runs)
      .where(inArray(runs.id, ids))
      .all();
    const snapshots = this.db
      .select({ a: iterationSnapshots.snapshotId, b: iterationSnapshots.parentId })
      .from(iterationSnapshots)
      .where(inArray(iterationSnapshots.runId, ids))
      .all();
    const changes = this.db
      .select({ a: runChanges.baselineSnapshot, b: runChanges.headSnapshot })
      .from(runChanges)
      .where(inArray(runChanges.runId, ids))
      .all();
    return runSnapshotsOf(runRows, [...snapshots, ...changes]);
  }

  candidates(finishedBefore: number, afterId: string, limit: number): PrunableRun[] {
    return (
      this.db
        .select({ id: runs.id, sessionId: runs.sessionId, workspace: runs.workspace })
        .from(runs)
        // The unary + keeps SQLite off the (status, id) index: with it, each batch sorted every
        // finished run before the cut by id (a temporary B-tree) to give 50 of them; on the
        // primary key the walk is in id order and stops at the 50th.
        .where(candidateConditions(finishedBefore, afterId, sql`+${runs.status}`))
        .orderBy(asc(runs.id))
        .limit(limit)
        .all()
    );
  }

  deleteRuns(ids: readonly string[], finishedBefore: number, now: number): string[] {
    if (ids.length === 0) return [];
    return this.db.transaction(
      (tx) =>
        tx
          .delete(runs)
          .where(
            and(
              deletableConditions(ids, finishedBefore, now),
              // The rows with the largest rowid stay: SQLite gives a new row the largest rowid
              // plus one, and the metrics read iterations and tool calls by a rowid cursor
              // (metrics-reader.ts) — with the newest row gone, new rows could take rowids the
              // cursor has passed, and never be counted.
              ne(
                runs.id,
                sql`coalesce((select run_id from ${iterations} order by rowid desc limit 1), '')`,
              ),
              ne(
                runs.id,
                sql`coalesce((select run_id from ${toolCalls} order by rowid desc limit 1), '')`,
              ),
            ),
          )
          .returning({ id: runs.id })
          .all()
          .map((row) => row.id),
      { behavior: "immediate" },
    );
  }
}
