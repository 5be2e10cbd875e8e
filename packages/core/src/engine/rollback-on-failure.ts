import { resolve } from "node:path";
import type { RunRecord } from "../domain/run";
import { restoreWorkspace } from "../snapshots/restore";
import { messageOf } from "../util/errors";
import { movedAway } from "../util/real-path";
import type { EngineResources } from "./resources";
import type { EventSpec } from "./run-context";
import { snapshotsOf } from "./snapshot-step";

/** How long its hold of the workspace lasts if the worker dies mid-restore. */
const HOLD_TTL_MS = 120_000;

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
  const notRestored = (why: string): EventSpec[] => [
    [
      "phase_failed",
      {
        phase: "rollback",
        error: `not restored: ${why}; the workspace is left as it is`,
        skipped: [],
      },
    ],
  ];
  // Never through a symlink put into the path since: the restore would empty where it leads.
  const path = resolve(run.workspace);
  const moved = movedAway(path);
  if (moved !== null) return notRestored(moved);
  // Another run working in the workspace (one inside the other counts) keeps its files.
  const hold = await res.store.holdWorkspaceFor(run, (res.now ?? Date.now)(), HOLD_TTL_MS);
  if (!hold.held) {
    return notRestored(
      hold.activeRunId
        ? `run ${hold.activeRunId} is active in the session or the workspace`
        : "another rollback is restoring the workspace",
    );
  }
  try {
    const restored = await restoreWorkspace(
      snapshotsOf(res),
      { sessionId: run.sessionId, runId: run.id, workspace: path },
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
  } finally {
    await res.store.releaseWorkspaceOf(run).catch((error: unknown) => {
      res.logger.warn({ err: error, runId: run.id }, "could not release the workspace's hold");
    });
  }
}
