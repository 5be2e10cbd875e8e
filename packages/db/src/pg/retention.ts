import { asc, eq, sql } from "drizzle-orm";
import {
  candidateConditions,
  deletableConditions,
  type PrunableRun,
  type RetentionPort,
  type SessionSnapshots,
  sessionSnapshotsOf,
} from "../retention";
import type { PgDb } from "./connection";
import { iterationSnapshots, runChanges, runs } from "./schema";

/** ../retention.ts on PostgreSQL (no rowid cursor to keep: its metrics watch runs). */
export class PgRetention implements RetentionPort {
  constructor(private readonly db: PgDb) {}

  async sessionSnapshots(sessionId: string): Promise<SessionSnapshots> {
    const ofSession = sql`(select ${runs.id} from ${runs} where ${runs.sessionId} = ${sessionId})`;
    const [runRows, snapshots, changes] = await Promise.all([
      this.db
        .select({ id: runs.id, baseline: runs.baselineSnapshot, latest: runs.latestSnapshot })
        .from(runs)
        .where(eq(runs.sessionId, sessionId)),
      this.db
        .select({ a: iterationSnapshots.snapshotId, b: iterationSnapshots.parentId })
        .from(iterationSnapshots)
        .where(sql`${iterationSnapshots.runId} in ${ofSession}`),
      this.db
        .select({ a: runChanges.baselineSnapshot, b: runChanges.headSnapshot })
        .from(runChanges)
        .where(sql`${runChanges.runId} in ${ofSession}`),
    ]);
    return sessionSnapshotsOf(runRows, [...snapshots, ...changes]);
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
