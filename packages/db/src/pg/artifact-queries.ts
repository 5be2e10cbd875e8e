import type { IterationSnapshot, PhaseArtifact, RunChange } from "@looprun/core";
import { and, asc, desc, eq } from "drizzle-orm";
import type { SnapshotRef } from "../artifact-queries";
import { inPhaseOrder, toIterationSnapshot, toPhaseArtifact, toRunChange } from "../records";
import type { PgDb } from "./connection";
import { iterationSnapshots, phaseArtifacts, runChanges } from "./schema";

/** ../artifact-queries.ts on PostgreSQL. */
export async function listPhaseArtifacts(db: PgDb, runId: string): Promise<PhaseArtifact[]> {
  const rows = await db.select().from(phaseArtifacts).where(eq(phaseArtifacts.runId, runId));
  return inPhaseOrder(rows.map(toPhaseArtifact));
}

export function listSnapshotRefs(db: PgDb, runId: string): Promise<SnapshotRef[]> {
  return db
    .select({
      runId: iterationSnapshots.runId,
      n: iterationSnapshots.n,
      attempt: iterationSnapshots.attempt,
      snapshotId: iterationSnapshots.snapshotId,
      parentId: iterationSnapshots.parentId,
      diffBytes: iterationSnapshots.diffBytes,
      diffTruncated: iterationSnapshots.diffTruncated,
      createdAt: iterationSnapshots.createdAt,
    })
    .from(iterationSnapshots)
    .where(eq(iterationSnapshots.runId, runId))
    .orderBy(asc(iterationSnapshots.n), asc(iterationSnapshots.attempt));
}

/** Iteration `n`'s snapshot (of its latest snapshotted attempt), with its diff. */
export async function iterationSnapshot(
  db: PgDb,
  runId: string,
  n: number,
): Promise<IterationSnapshot | null> {
  const [row] = await db
    .select()
    .from(iterationSnapshots)
    .where(and(eq(iterationSnapshots.runId, runId), eq(iterationSnapshots.n, n)))
    .orderBy(desc(iterationSnapshots.attempt))
    .limit(1);
  return row ? toIterationSnapshot(row) : null;
}

export async function runChange(db: PgDb, runId: string): Promise<RunChange | null> {
  const [row] = await db.select().from(runChanges).where(eq(runChanges.runId, runId));
  return row ? toRunChange(row) : null;
}
