import type { RunMutation } from "@looprun/core";
import type { Db } from "./connection";
import { preparedOnce, ShapedStatements } from "./prepared";
import { iterationSnapshots, phaseArtifacts, reviewArtifacts, runChanges } from "./schema";

/**
 * The artifact parts of an engine write (review, snapshot, the run's change, a phase
 * artifact). Runs inside the commit's transaction, after its epoch check. A rerun iteration
 * attempt or phase replaces what an interrupted one may have left.
 */
export function writeArtifacts(db: Db, runId: string, m: RunMutation): void {
  const st = preparedOnce(db, artifactStatements);
  const write = (statements: ShapedStatements<Runnable>, values: object) => {
    const { statement, params } = statements.for({ ...values, runId });
    statement.run(params);
  };
  if (m.insertReview) write(st.review, m.insertReview);
  for (const snapshot of m.insertSnapshots ?? []) write(st.snapshot, snapshot);
  if (m.change) write(st.change, m.change);
  if (m.phaseArtifact) write(st.phase, m.phaseArtifact);
}

interface Runnable {
  run(params: Record<string, unknown>): unknown;
}

/** Every column written is also what a conflicting row gets (except the key, which is equal). */
function artifactStatements(db: Db) {
  return {
    review: new ShapedStatements<Runnable>((set) =>
      db
        .insert(reviewArtifacts)
        .values(set as never)
        .prepare(),
    ),
    snapshot: new ShapedStatements<Runnable>((set) =>
      db
        .insert(iterationSnapshots)
        .values(set as never)
        .onConflictDoUpdate({
          target: [iterationSnapshots.runId, iterationSnapshots.n, iterationSnapshots.attempt],
          set: set as never,
        })
        .prepare(),
    ),
    change: new ShapedStatements<Runnable>((set) =>
      db
        .insert(runChanges)
        .values(set as never)
        .onConflictDoUpdate({ target: runChanges.runId, set: set as never })
        .prepare(),
    ),
    phase: new ShapedStatements<Runnable>((set) =>
      db
        .insert(phaseArtifacts)
        .values(set as never)
        .onConflictDoUpdate({
          target: [phaseArtifacts.runId, phaseArtifacts.phase],
          set: set as never,
        })
        .prepare(),
    ),
  };
}
