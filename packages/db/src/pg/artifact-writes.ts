import type { RunMutation } from "@looprun/core";
import type { PgDb } from "./connection";
import { iterationSnapshots, phaseArtifacts, reviewArtifacts, runChanges } from "./schema";

type Tx = Pick<PgDb, "insert">;

/** The artifact parts of an engine write: ../artifact-writes.ts on PostgreSQL. */
export async function writeArtifacts(tx: Tx, runId: string, m: RunMutation): Promise<void> {
  if (m.insertReview) {
    await tx.insert(reviewArtifacts).values({ ...m.insertReview, runId });
  }
  for (const { runId: _ignored, ...snapshot } of m.insertSnapshots ?? []) {
    await tx
      .insert(iterationSnapshots)
      .values({ ...snapshot, runId })
      .onConflictDoUpdate({
        target: [iterationSnapshots.runId, iterationSnapshots.n, iterationSnapshots.attempt],
        set: snapshot,
      });
  }
  if (m.change) {
    const { runId: _ignored, ...change } = m.change;
    await tx
      .insert(runChanges)
      .values({ ...change, runId })
      .onConflictDoUpdate({ target: runChanges.runId, set: change });
  }
  if (m.phaseArtifact) {
    const { runId: _ignored, ...artifact } = m.phaseArtifact;
    await tx
      .insert(phaseArtifacts)
      .values({ ...artifact, runId })
      .onConflictDoUpdate({ target: [phaseArtifacts.runId, phaseArtifacts.phase], set: artifact });
  }
}
