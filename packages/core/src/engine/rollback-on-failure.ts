import type { RunRecord } from "../domain/run";
import { restoreWorkspace } from "../snapshots/restore";
import { messageOf } from "../util/errors";
import type { EngineResources } from "./resources";
import type { EventSpec } from "./run-context";
import { snapshotsOf } from "./snapshot-step";

/** Whether the run restores its workspace as it ends `failed` (see rollbackOnFailure). */
export function restoresOnFailure(run: RunRecord): run is RunRecord & { baselineSnapshot: string } {
  return run.spec.rollbackOnFailure && run.baselineSnapshot !== null;
}

/**
 * `rollbackOnFailure`: puts the workspace back as it was before the run (its baseline
 * snapshot) as the run ends `failed`. The failed attempt stays available: its patch is
 * stored with the run, and the workspace as it was just before the restore is kept as a
 * snapshot (`before`). Never throws: a restore that fails is reported as `phase_failed`.
 */
export async function rollbackOnFailure(
  res: EngineResources,
  run: RunRecord,
): Promise<EventSpec[]> {
  if (!restoresOnFailure(run)) return [];
  const baseline = run.baselineSnapshot;
  try {
    const restored = await restoreWorkspace(
      snapshotsOf(res),
      { sessionId: run.sessionId, runId: run.id, workspace: run.workspace },
      baseline,
    );
    return [
      [
        "rollback_applied",
        {
          iteration: 0,
          snapshot: baseline,
          before: restored.before,
          onFailure: true,
          files: restored.files,
        },
      ],
    ];
  } catch (error) {
    res.logger.warn({ err: error, runId: run.id }, "rollback on failure did not apply");
    const message = messageOf(error);
    return [["phase_failed", { phase: "rollback", error: message.slice(0, 2000), skipped: [] }]];
  }
}
