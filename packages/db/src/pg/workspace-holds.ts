import { and, eq, inArray, sql, TransactionRollbackError } from "drizzle-orm";
import {
  type HeldRun,
  type HoldRequest,
  type HoldResult,
  holdKeys,
  holdsBarring,
  runsBarring,
} from "../workspace-holds";
import type { PgDb } from "./connection";
import { runs, workspaceHolds } from "./schema";

/**
 * ../workspace-holds.ts on PostgreSQL. Under READ COMMITTED a submit committing meanwhile
 * could be missed by the check, and its worker miss the hold: the transaction first takes
 * `runs` in SHARE mode, which waits for the submits in flight to commit (they are seen) and
 * makes new ones wait until the hold is committed (their worker sees it). Milliseconds, and
 * only for a rollback. Holds are taken one at a time (the holds table in SHARE ROW EXCLUSIVE
 * mode, which conflicts with itself): two rollbacks of overlapping workspaces, which have no
 * key in common, would otherwise both pass the reads.
 */
export async function holdWorkspace(db: PgDb, req: HoldRequest): Promise<HoldResult> {
  const refused: HoldResult = { held: false, heldByRun: "" };
  try {
    return await db.transaction(async (tx): Promise<HoldResult> => {
      await tx.execute(sql`lock table workspace_holds in share row exclusive mode`);
      await tx.execute(sql`lock table runs in share mode`);
      // After the lock: a retention delete in flight has committed (its deletes skip held runs).
      const [found] = await tx.select({ id: runs.id }).from(runs).where(eq(runs.id, req.runId));
      if (!found) return { held: false, runGone: true };
      const [active] = await tx.select({ id: runs.id }).from(runs).where(runsBarring(req)).limit(1);
      if (active) return { held: false, activeRunId: active.id };
      const keys = holdKeys(req);
      const [hold] = await tx
        .select({ runId: workspaceHolds.runId })
        .from(workspaceHolds)
        .where(holdsBarring(req, req.now));
      if (hold) return { held: false, heldByRun: hold.runId };
      // Taken unless a live hold is there (an expired one is replaced). The table lock above
      // already serialises holds; should two ever pass the reads together, the second's insert
      // waits for the first's rows, then finds them live and takes nothing.
      const expiresAt = req.now + req.ttlMs;
      const taken = await tx
        .insert(workspaceHolds)
        .values(keys.map((workspace) => ({ workspace, runId: req.runId, expiresAt })))
        .onConflictDoUpdate({
          target: workspaceHolds.workspace,
          set: { runId: req.runId, expiresAt },
          setWhere: sql`${workspaceHolds.expiresAt} <= ${req.now}`,
        })
        .returning({ workspace: workspaceHolds.workspace });
      if (taken.length < keys.length) tx.rollback();
      return { held: true };
    });
  } catch (error) {
    if (error instanceof TransactionRollbackError) return refused;
    throw error;
  }
}

export async function releaseWorkspace(
  db: PgDb,
  req: Pick<HoldRequest, "workspace" | "sessionId" | "runId">,
): Promise<void> {
  await db
    .delete(workspaceHolds)
    .where(
      and(inArray(workspaceHolds.workspace, holdKeys(req)), eq(workspaceHolds.runId, req.runId)),
    );
}

export async function workspaceHeldUntil(
  db: PgDb,
  run: HeldRun,
  now: number,
): Promise<number | null> {
  const [hold] = await db
    .select({ expiresAt: workspaceHolds.expiresAt })
    .from(workspaceHolds)
    .where(holdsBarring(run, now))
    .limit(1);
  return hold?.expiresAt ?? null;
}
