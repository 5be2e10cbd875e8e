import type { IterationSnapshot, RunChange } from "../domain/snapshots";
import { type CappedText, WorkspaceSnapshots } from "../snapshots/workspace-snapshots";
import type { EngineResources } from "./resources";
import type { RunContext } from "./run-context";

export const SNAPSHOT_DEFAULTS = {
  dir: ".looprun/snapshots",
  timeoutMs: 60_000,
  diffCapBytes: 256 * 1024,
  patchCapBytes: 8 * 1024 * 1024,
} as const;

export function snapshotsOf(res: EngineResources): WorkspaceSnapshots {
  return new WorkspaceSnapshots({
    root: res.snapshotsDir ?? SNAPSHOT_DEFAULTS.dir,
    path: res.commandEnv.PATH,
    timeoutMs: res.snapshotTimeoutMs ?? SNAPSHOT_DEFAULTS.timeoutMs,
  });
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * Snapshots the workspace as the run's baseline ("iteration 0") unless it has one.
 * Returns the error when git fails.
 */
export async function ensureBaseline(
  res: EngineResources,
  ctx: RunContext,
): Promise<string | null> {
  if (ctx.run.baselineSnapshot !== null) return null;
  const { run } = ctx;
  let id: string;
  try {
    id = await snapshotsOf(res).take(
      { sessionId: run.sessionId, runId: run.id, workspace: run.workspace },
      "baseline",
      null,
    );
  } catch (error) {
    return `could not snapshot the workspace (is git on PATH?): ${messageOf(error)}`;
  }
  await ctx.commit({ baselineSnapshot: id, latestSnapshot: id });
  return null;
}

export type IterationSnapshotResult =
  | {
      ok: true;
      snapshot: IterationSnapshot;
      change: RunChange;
      /** The run's change so far (baseline → this snapshot), for the reviewer. */
      reviewDiff: string;
    }
  | { ok: false; error: string };

/**
 * Snapshots the workspace after iteration `n` and stores the snapshot, its diff against the
 * previous one (capped) and the run's whole change (baseline → now).
 */
export async function snapshotIteration(
  res: EngineResources,
  ctx: RunContext,
  n: number,
  attempt: number,
  signal: AbortSignal,
): Promise<IterationSnapshotResult> {
  const { run } = ctx;
  const baseline = run.baselineSnapshot;
  if (baseline === null) return { ok: false, error: "the run has no baseline snapshot" };
  // The snapshot of the last decided iteration (or the baseline).
  const parent = run.latestSnapshot ?? baseline;
  const snapshots = snapshotsOf(res);
  let id: string;
  let diff: CappedText;
  let whole: CappedText;
  let summary: { files: string[]; stat: string };
  try {
    id = await snapshots.take(
      { sessionId: run.sessionId, runId: run.id, workspace: run.workspace },
      `iteration ${n} attempt ${attempt}`,
      parent,
      signal,
    );
    // Read-only git commands on the new snapshot: side by side, not one after the other (each
    // is a process spawn of a few ms, most of an iteration's own time with quick commands).
    [diff, whole, summary] = await Promise.all([
      snapshots.diff(
        run.sessionId,
        parent,
        id,
        res.diffCapBytes ?? SNAPSHOT_DEFAULTS.diffCapBytes,
        signal,
      ),
      snapshots.diff(
        run.sessionId,
        baseline,
        id,
        res.patchCapBytes ?? SNAPSHOT_DEFAULTS.patchCapBytes,
        signal,
      ),
      snapshots.summary(run.sessionId, baseline, id, signal),
    ]);
  } catch (error) {
    return { ok: false, error: `could not snapshot the workspace: ${messageOf(error)}` };
  }
  const now = ctx.now();
  const snapshot: IterationSnapshot = {
    runId: run.id,
    n,
    attempt,
    snapshotId: id,
    parentId: parent,
    diff: diff.text,
    diffBytes: diff.bytes,
    diffTruncated: diff.truncated,
    createdAt: now,
  };
  const change: RunChange = {
    runId: run.id,
    baselineSnapshot: baseline,
    headSnapshot: id,
    iteration: n,
    files: summary.files,
    stat: summary.stat,
    patch: whole.truncated ? null : whole.text,
    patchBytes: whole.bytes,
    updatedAt: now,
  };
  // The run's `latestSnapshot` moves on when the iteration is decided: an attempt that is
  // interrupted now leaves the next attempt comparing with the same parent.
  await ctx.commit({}, [], { insertSnapshot: snapshot, change });
  return { ok: true, snapshot, change, reviewDiff: whole.text };
}
