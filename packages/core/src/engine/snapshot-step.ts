import type { IterationSnapshot, RunChange } from "../domain/snapshots";
import { iterationDiffs } from "../snapshots/iteration-diffs";
import {
  type CappedText,
  type SnapshotChange,
  WorkspaceSnapshots,
} from "../snapshots/workspace-snapshots";
import type { EngineResources } from "./resources";
import type { RunContext } from "./run-context";
import type { MutationExtras } from "./run-store";

export const SNAPSHOT_DEFAULTS = {
  dir: ".looprun/snapshots",
  timeoutMs: 60_000,
  diffCapBytes: 256 * 1024,
  patchCapBytes: 8 * 1024 * 1024,
} as const;

const snapshotsByResources = new WeakMap<EngineResources, WorkspaceSnapshots>();

/** The worker's snapshot store (one per resources bag: it remembers what it wrote). */
export function snapshotsOf(res: EngineResources): WorkspaceSnapshots {
  let snapshots = snapshotsByResources.get(res);
  if (snapshots === undefined) {
    snapshots = new WorkspaceSnapshots({
      root: res.snapshotsDir ?? SNAPSHOT_DEFAULTS.dir,
      path: res.commandEnv.PATH,
      timeoutMs: res.snapshotTimeoutMs ?? SNAPSHOT_DEFAULTS.timeoutMs,
    });
    snapshotsByResources.set(res, snapshots);
  }
  return snapshots;
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
      /** The snapshot's rows, when the caller writes them with the iteration's decision. */
      writes: Pick<MutationExtras, "insertSnapshot" | "change">;
    }
  | { ok: false; error: string };

/**
 * Snapshots the workspace after iteration `n` and stores the snapshot, its diff against the
 * previous one (capped) and the run's whole change (baseline → now) — at once, or with the
 * iteration's decision when `deferWrites` (one write less per iteration; a snapshot is
 * stored now only when a review follows, so that the diff is there while it runs).
 */
export async function snapshotIteration(
  res: EngineResources,
  ctx: RunContext,
  n: number,
  attempt: number,
  signal: AbortSignal,
  deferWrites = false,
): Promise<IterationSnapshotResult> {
  const { run } = ctx;
  const baseline = run.baselineSnapshot;
  if (baseline === null) return { ok: false, error: "the run has no baseline snapshot" };
  // The snapshot of the last decided iteration (or the baseline).
  const parent = run.latestSnapshot ?? baseline;
  const snapshots = snapshotsOf(res);
  let id: string;
  let diff: CappedText;
  let whole: SnapshotChange;
  try {
    id = await snapshots.take(
      { sessionId: run.sessionId, runId: run.id, workspace: run.workspace },
      `iteration ${n} attempt ${attempt}`,
      parent,
      signal,
    );
    // This iteration's diff and the run's change so far (files, stat, patch): one git
    // process for both (see iteration-diffs.ts).
    ({ diff, change: whole } = await iterationDiffs(snapshots, {
      sessionId: run.sessionId,
      baseline,
      parent,
      head: id,
      diffCapBytes: res.diffCapBytes ?? SNAPSHOT_DEFAULTS.diffCapBytes,
      patchCapBytes: res.patchCapBytes ?? SNAPSHOT_DEFAULTS.patchCapBytes,
      signal,
    }));
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
    files: whole.files,
    stat: whole.stat,
    patch: whole.patch.truncated ? null : whole.patch.text,
    patchBytes: whole.patch.bytes,
    updatedAt: now,
  };
  // The run's `latestSnapshot` moves on when the iteration is decided: an attempt that is
  // interrupted now leaves the next attempt comparing with the same parent.
  const writes = { insertSnapshot: snapshot, change };
  if (deferWrites) return { ok: true, snapshot, change, reviewDiff: whole.patch.text, writes };
  await ctx.commit({}, [], writes);
  return { ok: true, snapshot, change, reviewDiff: whole.patch.text, writes: {} };
}
