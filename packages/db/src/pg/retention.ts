import { asc } from "drizzle-orm";
import {
  candidateConditions,
  deletableConditions,
  type PrunableRun,
  type RetentionPort,
} from "../retention";
import type { PgDb } from "./connection";
import { runs } from "./schema";

/** ../retention.ts on PostgreSQL (no rowid cursor to keep: its metrics watch runs). */
export class PgRetention implements RetentionPort {
  constructor(private readonly db: PgDb) {}

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
