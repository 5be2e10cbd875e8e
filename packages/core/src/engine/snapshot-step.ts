import type { IterationSnapshot, RunChange } from "../domain/snapshots";
import { iterationDiffs } from "../snapshots/iteration-diffs";
import { WorkspaceSnapshots } from "../snapshots/workspace-snapshots";
import { messageOf } from "../util/errors";
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

/** What an iteration's snapshot stores: its row (with its diff) and the run's change so far. */
export interface SnapshotArtifacts {
  /** The rows to write (empty when they are stored already: before a review). */
  writes: Pick<MutationExtras, "insertSnapshot" | "change">;
  change: RunChange;
}

export type IterationSnapshotResult =
  | {
      ok: true;
      snapshotId: string;
      /** The iteration changed the workspace (its tree differs from its parent's). */
      changed: boolean;
      /** The run's change so far (baseline → this snapshot), for the reviewer. */
      reviewDiff: string;
      /**
       * The diffs and rows — computed when first asked for when `deferred`: the decision
       * needs only `changed`, and the git process of the diffs can run while the next
       * iteration's agent does.
       */
      artifacts: () => Promise<SnapshotArtifacts>;
    }
  | { ok: false; error: string };

/**
 * Snapshots the workspace after iteration `n`, then computes its diff against the previous
 * snapshot (capped) and the run's whole change (baseline → now). With a review to follow
 * they are computed and stored at once, so that the diff is there while the reviewer runs;
 * else (`deferred`) the caller computes them when it wants them and writes them later (see
 * RunContext.defer: with the next write of the run, or its end).
 */
export async function snapshotIteration(
  res: EngineResources,
  ctx: RunContext,
  n: number,
  attempt: number,
  signal: AbortSignal,
  deferred = false,
): Promise<IterationSnapshotResult> {
  const { run } = ctx;
  const baseline = run.baselineSnapshot;
  if (baseline === null) return { ok: false, error: "the run has no baseline snapshot" };
  // The snapshot of the last decided iteration (or the baseline).
  const parent = run.latestSnapshot ?? baseline;
  const snapshots = snapshotsOf(res);
  let id: string;
  let trees: (string | null)[];
  try {
    id = await snapshots.take(
      { sessionId: run.sessionId, runId: run.id, workspace: run.workspace },
      `iteration ${n} attempt ${attempt}`,
      parent,
      signal,
    );
    trees = await Promise.all([parent, id].map((c) => snapshots.treeOf(run.sessionId, c)));
  } catch (error) {
    return { ok: false, error: `could not snapshot the workspace: ${messageOf(error)}` };
  }
  const artifacts = (abort?: AbortSignal) =>
    snapshotArtifacts(res, ctx, { n, attempt, baseline, parent, head: id }, abort);
  const [parentTree, headTree] = trees;
  if (deferred && parentTree && headTree) {
    // Started by whoever needs them first, once (not tied to this iteration's signal: the
    // iteration ends before).
    let later: Promise<SnapshotArtifacts> | null = null;
    return {
      ok: true,
      snapshotId: id,
      changed: parentTree !== headTree,
      reviewDiff: "",
      artifacts: () => {
        later ??= artifacts();
        return later;
      },
    };
  }
  let computed: SnapshotArtifacts & { reviewDiff: string };
  try {
    computed = await artifacts(signal);
  } catch (error) {
    return { ok: false, error: `could not snapshot the workspace: ${messageOf(error)}` };
  }
  const changed = (computed.writes.insertSnapshot?.diffBytes ?? 0) > 0;
  if (deferred)
    return { ok: true, snapshotId: id, changed, reviewDiff: "", artifacts: async () => computed };
  await ctx.commit({}, [], computed.writes);
  return {
    ok: true,
    snapshotId: id,
    changed,
    reviewDiff: computed.reviewDiff,
    artifacts: async () => ({ writes: {}, change: computed.change }),
  };
}

/**
 * Writes the snapshot rows of the run's last decided iteration when they are missing: its
 * worker died between the decision and the deferred write (see RunContext.defer). They are
 * computed again from the snapshot, whose commit names its parent.
 */
export async function backfillSnapshot(res: EngineResources, ctx: RunContext): Promise<void> {
  const { run, lastDecided } = ctx;
  const head = run.latestSnapshot;
  if (lastDecided === null || head === null || run.baselineSnapshot === null) return;
  if (head === run.baselineSnapshot) return;
  if (await res.store.hasSnapshot(run.id, lastDecided.n, lastDecided.attempt)) return;
  const parent = await snapshotsOf(res).parentOf(run.sessionId, head);
  if (parent === null) return;
  const pair = { n: lastDecided.n, attempt: lastDecided.attempt, baseline: run.baselineSnapshot };
  const { writes } = await snapshotArtifacts(res, ctx, { ...pair, parent, head });
  await ctx.commit({}, [], writes);
  res.logger.info(
    { runId: run.id, iteration: lastDecided.n },
    "wrote the snapshot rows an interrupted worker left out",
  );
}

interface SnapshotPair {
  n: number;
  attempt: number;
  baseline: string;
  parent: string;
  head: string;
}

/** The diffs of snapshot `head` (one git process, see iteration-diffs.ts) as rows to write. */
async function snapshotArtifacts(
  res: EngineResources,
  ctx: RunContext,
  { n, attempt, baseline, parent, head }: SnapshotPair,
  signal?: AbortSignal,
): Promise<SnapshotArtifacts & { reviewDiff: string }> {
  const { run } = ctx;
  const { diff, change: whole } = await iterationDiffs(snapshotsOf(res), {
    sessionId: run.sessionId,
    baseline,
    parent,
    head,
    diffCapBytes: res.diffCapBytes ?? SNAPSHOT_DEFAULTS.diffCapBytes,
    patchCapBytes: res.patchCapBytes ?? SNAPSHOT_DEFAULTS.patchCapBytes,
    ...(signal ? { signal } : {}),
  });
  const now = ctx.now();
  const snapshot: IterationSnapshot = {
    runId: run.id,
    n,
    attempt,
    snapshotId: head,
    parentId: parent,
    diff: diff.text,
    diffBytes: diff.bytes,
    diffTruncated: diff.truncated,
    createdAt: now,
  };
  const change: RunChange = {
    runId: run.id,
    baselineSnapshot: baseline,
    headSnapshot: head,
    iteration: n,
    files: whole.files,
    stat: whole.stat,
    patch: whole.patch.truncated ? null : whole.patch.text,
    patchBytes: whole.patch.bytes,
    updatedAt: now,
  };
  // The run's `latestSnapshot` moves on when the iteration is decided: an attempt that is
  // interrupted now leaves the next attempt comparing with the same parent.
  return { writes: { insertSnapshot: snapshot, change }, change, reviewDiff: whole.patch.text };
}
