import type { RunRecords } from "@looprun/core";
import { asc, inArray } from "drizzle-orm";
import {
  candidateConditions,
  deletableConditions,
  type PrunableRun,
  type RetentionPort,
  runSnapshotsOf,
} from "../retention";
import type { PgDb } from "./connection";
import { iterationSnapshots, runChanges, runs } from "./schema";

/** ../retention.ts on PostgreSQL (no rowid cursor to keep: its metrics watch runs). */
export class PgRetention implements RetentionPort {
  constructor(private readonly db: PgDb) {}

  async snapshotsOfRuns(runIds: readonly string[]): Promise<RunRecords> {
    if (runIds.length === 0) return { runIds: [], snapshotIds: [] };
    const ids = [...runIds];
    const [runRows, snapshots, changes] = await Promise.all([
      this.db
        .select({ id: runs.id, baseline: runs.baselineSnapshot, latest: runs.latestSnapshot })
        .from(runs)
        .where(inArray(runs.id, ids)),
      this.db
        .select({ a: iterationSnapshots.snapshotId, b: iterationSnapshots.parentId })
        .from(iterationSnapshots)
        .where(inArray(iterationSnapshots.runId, ids)),
      this.db
        .select({ a: runChanges.baselineSnapshot, b: runChanges.headSnapshot })
        .from(runChanges)
        .where(inArray(runChanges.runId, ids)),
    ]);
    return runSnapshotsOf(runRows, [...snapshots, ...changes]);
  }

  async candidates(finishedBefore: number, afterId: string, limit: number): Promise<PrunableRun[]> {
    return await this.db
      .select({ id: runs.id, sessionId: runs.sessionId, workspace: runs.workspace })
      .from(runs)
      .where(candidateConditions(finishedBefore, afterId))
      .orderBy(asc(runs.id))
      .limit(limit);
  }

  async deleteRuns(ids: readonly string[], finishedBefore: number, now: number): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await this.db
      .delete(runs)
      .where(deletableConditions(ids, finishedBefore, now))
      .returning({ id: runs.id });
    return rows.map((row) => row.id);
  }
}
