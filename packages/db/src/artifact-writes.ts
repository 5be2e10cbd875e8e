import type { RunMutation } from "@looprun/core";
import type { Db } from "./connection";
import { iterationSnapshots, phaseArtifacts, reviewArtifacts, runChanges } from "./schema";

type Tx = Pick<Db, "insert">;

/**
 * The artifact parts of an engine write (review, snapshot, the run's change, a phase
 * artifact). Runs inside the commit's transaction, after its epoch check. A rerun iteration
 * attempt or phase replaces what an interrupted one may have left.
 */
export function writeArtifacts(tx: Tx, runId: string, m: RunMutation): void {
  if (m.insertReview) {
    tx.insert(reviewArtifacts)
      .values({ ...m.insertReview, runId })
      .run();
  }
  if (m.insertSnapshot) {
    const { runId: _ignored, ...snapshot } = m.insertSnapshot;
    tx.insert(iterationSnapshots)
      .values({ ...snapshot, runId })
      .onConflictDoUpdate({
        target: [iterationSnapshots.runId, iterationSnapshots.n, iterationSnapshots.attempt],
        set: snapshot,
      })
      .run();
  }
  if (m.change) {
    const { runId: _ignored, ...change } = m.change;
    tx.insert(runChanges)
      .values({ ...change, runId })
      .onConflictDoUpdate({ target: runChanges.runId, set: change })
      .run();
  }
  if (m.phaseArtifact) {
    const { runId: _ignored, ...artifact } = m.phaseArtifact;
    tx.insert(phaseArtifacts)
      .values({ ...artifact, runId })
      .onConflictDoUpdate({ target: [phaseArtifacts.runId, phaseArtifacts.phase], set: artifact })
      .run();
  }
}
