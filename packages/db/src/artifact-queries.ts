import type { IterationSnapshot, PhaseArtifact, RunChange } from "@looprun/core";
import { and, asc, desc, eq } from "drizzle-orm";
import type { Db } from "./connection";
import { inPhaseOrder, toIterationSnapshot, toPhaseArtifact, toRunChange } from "./records";
import { iterationSnapshots, phaseArtifacts, runChanges } from "./schema";

/** An iteration attempt's snapshot without its diff (for lists). */
export type SnapshotRef = Omit<IterationSnapshot, "diff">;

/** A run's pipeline phase artifacts, in phase order (the engine's prompt and the API's list). */
export function listPhaseArtifacts(db: Db, runId: string): PhaseArtifact[] {
  return inPhaseOrder(
    db
      .select()
      .from(phaseArtifacts)
      .where(eq(phaseArtifacts.runId, runId))
      .all()
      .map(toPhaseArtifact),
  );
}

export function listSnapshotRefs(db: Db, runId: string): SnapshotRef[] {
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
    .orderBy(asc(iterationSnapshots.n), asc(iterationSnapshots.attempt))
    .all();
}

/** Iteration `n`'s snapshot (of its latest snapshotted attempt), with its diff. */
export function iterationSnapshot(db: Db, runId: string, n: number): IterationSnapshot | null {
  const row = db
    .select()
    .from(iterationSnapshots)
    .where(and(eq(iterationSnapshots.runId, runId), eq(iterationSnapshots.n, n)))
    .orderBy(desc(iterationSnapshots.attempt))
    .limit(1)
    .get();
  return row ? toIterationSnapshot(row) : null;
}

export function runChange(db: Db, runId: string): RunChange | null {
  const row = db.select().from(runChanges).where(eq(runChanges.runId, runId)).get();
  return row ? toRunChange(row) : null;
}
