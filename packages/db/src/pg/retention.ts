import { TERMINAL_STATUSES } from "@looprun/core";
import { and, asc, eq, gt, inArray, lt, notExists, sql } from "drizzle-orm";
import type { PrunableRun, RetentionPort } from "../retention";
import { ulidFloor } from "../ulid-floor";
import type { PgDb } from "./connection";
import { runs, workspaceHolds } from "./schema";

const finished = [...TERMINAL_STATUSES];

/** ../retention.ts on PostgreSQL. */
export class PgRetention implements RetentionPort {
  constructor(private readonly db: PgDb) {}

  async candidates(finishedBefore: number, afterId: string, limit: number): Promise<PrunableRun[]> {
    return await this.db
      .select({ id: runs.id, sessionId: runs.sessionId, workspace: runs.workspace })
      .from(runs)
      .where(
        and(
          gt(runs.id, afterId),
          lt(runs.id, ulidFloor(finishedBefore)),
          inArray(runs.status, finished),
          lt(runs.finishedAt, finishedBefore),
        ),
      )
      .orderBy(asc(runs.id))
      .limit(limit);
  }

  async deleteRuns(ids: readonly string[], finishedBefore: number, now: number): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await this.db
      .delete(runs)
      .where(
        and(
          inArray(runs.id, [...ids]),
          inArray(runs.status, finished),
          lt(runs.finishedAt, finishedBefore),
          notExists(
            this.db
              .select({ one: sql`1` })
              .from(workspaceHolds)
              .where(and(eq(workspaceHolds.runId, runs.id), gt(workspaceHolds.expiresAt, now))),
          ),
        ),
      )
      .returning({ id: runs.id });
    return rows.map((row) => row.id);
  }
}
