import type { IterationSnapshot, RunChange } from "../domain/snapshots";
import { batchDiffs } from "../snapshots/iteration-diffs";
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
      ...(res.spareFiles !== undefined ? { spareFiles: res.spareFiles } : {}),
    });
    snapshotsByResources.set(res, snapshots);
  }
  return snapshots;
}

/** Closes the snapshot store of `res`, if it made one (a worker shutting down). */
export async function closeSnapshotsOf(res: EngineResources): Promise<void> {
  const snapshots = snapshotsByResources.get(res);
  snapshotsByResources.delete(res);
  await snapshots?.close();
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

/**
 * A decided iteration's snapshot whose rows are not stored yet (see RunContext.deferSnapshot):
 * its diff against `parent` (the previous iteration's snapshot, or the baseline).
 */
export interface PendingSnapshot {
  n: number;
  attempt: number;
  parent: string;
  head: string;
}

/** What snapshots store: their rows (with their diffs) and the run's change up to the last. */
export interface SnapshotRows {
  writes: Pick<MutationExtras, "insertSnapshots" | "change">;
  change: RunChange;
  /** The run's change as a patch (for a reviewer). */
  reviewDiff: string;
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
       * Its rows when they are still to compute (`deferred`: the decision needs only
       * `changed`; see RunContext.deferSnapshot), else null: stored already.
       */
      pending: PendingSnapshot | null;
      /** The run's change up to this snapshot, when its rows were computed here. */
      change: RunChange | null;
    }
  | { ok: false; error: string };

/**
 * Snapshots the workspace after iteration `n`, then computes its diff against the previous
 * snapshot (capped) and the run's whole change (baseline → now). With a review to follow
 * they are computed and stored at once, so that the diff is there while the reviewer runs;
 * else (`deferred`) the caller hands them to RunContext.deferSnapshot, which computes them
 * with those of other iterations and writes them later.
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
  const pending: PendingSnapshot = { n, attempt, parent, head: id };
  const [parentTree, headTree] = trees;
  if (deferred && parentTree && headTree) {
    return {
      ok: true,
      snapshotId: id,
      changed: parentTree !== headTree,
      reviewDiff: "",
      pending,
      change: null,
    };
  }
  let computed: SnapshotRows;
  try {
    computed = await snapshotRows(res, ctx, [pending], signal);
  } catch (error) {
    return { ok: false, error: `could not snapshot the workspace: ${messageOf(error)}` };
  }
  const changed = (computed.writes.insertSnapshots?.[0]?.diffBytes ?? 0) > 0;
  await ctx.commit({}, [], computed.writes);
  return {
    ok: true,
    snapshotId: id,
    changed,
    reviewDiff: computed.reviewDiff,
    pending: null,
    change: computed.change,
  };
}

/** How many decided iterations without rows a resumed run looks back over (see below). */
const BACKFILL_MAX = 64;

const SNAPSHOT_LABEL = /^looprun (\S+) iteration (\d+) attempt (\d+)$/;

/**
 * Writes the snapshot rows of the run's last decided iterations when they are missing: their
 * worker died between the decisions and the deferred write (see RunContext.deferSnapshot).
 * They are computed again from the snapshots, whose commits name their parents: the walk goes
 * back from the latest one to the first whose rows are stored.
 */
export async function backfillSnapshot(res: EngineResources, ctx: RunContext): Promise<void> {
  const { run, lastDecided } = ctx;
  const baseline = run.baselineSnapshot;
  const latest = run.latestSnapshot;
  if (lastDecided === null || latest === null || baseline === null) return;
  if (latest === baseline) return;
  if (await res.store.hasSnapshot(run.id, lastDecided.n, lastDecided.attempt)) return;
  const snapshots = snapshotsOf(res);
  const missing: PendingSnapshot[] = [];
  let next: Omit<PendingSnapshot, "parent"> | null = {
    n: lastDecided.n,
    attempt: lastDecided.attempt,
    head: latest,
  };
  while (next !== null && missing.length < BACKFILL_MAX) {
    const commit = await snapshots.commitOf(run.sessionId, next.head);
    if (commit?.parent == null) break;
    missing.unshift({ ...next, parent: commit.parent });
    next = null;
    if (commit.parent === baseline) break;
    const before = await snapshots.commitOf(run.sessionId, commit.parent);
    const label = SNAPSHOT_LABEL.exec(before?.message ?? "");
    if (label === null || label[1] !== run.id) break;
    const [n, attempt] = [Number(label[2]), Number(label[3])];
    if (!(await res.store.hasSnapshot(run.id, n, attempt)))
      next = { n, attempt, head: commit.parent };
  }
  if (missing.length === 0) return;
  const { writes } = await snapshotRows(res, ctx, missing);
  await ctx.commit({}, [], writes);
  res.logger.info(
    { runId: run.id, iterations: missing.map((m) => m.n) },
    "wrote the snapshot rows an interrupted worker left out",
  );
}

/**
 * The rows of `pending` snapshots (iterations that followed one another, oldest first): each
 * one's diff, and the run's change up to the last — from one git process (see
 * iteration-diffs.ts).
 */
export async function snapshotRows(
  res: EngineResources,
  ctx: RunContext,
  pending: readonly PendingSnapshot[],
  signal?: AbortSignal,
): Promise<SnapshotRows> {
  const { run } = ctx;
  const baseline = run.baselineSnapshot;
  const last = pending.at(-1);
  if (baseline === null || last === undefined) throw new Error("no snapshot rows to compute");
  const { diffs, change: whole } = await batchDiffs(snapshotsOf(res), {
    sessionId: run.sessionId,
    baseline,
    pairs: pending.map(({ parent, head }) => ({ parent, head })),
    diffCapBytes: res.diffCapBytes ?? SNAPSHOT_DEFAULTS.diffCapBytes,
    patchCapBytes: res.patchCapBytes ?? SNAPSHOT_DEFAULTS.patchCapBytes,
    ...(signal ? { signal } : {}),
  });
  const now = ctx.now();
  const rows: IterationSnapshot[] = pending.map(({ n, attempt, parent, head }, i) => {
    const diff = diffs[i] as (typeof diffs)[number];
    return {
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
  });
  const change: RunChange = {
    runId: run.id,
    baselineSnapshot: baseline,
    headSnapshot: last.head,
    iteration: last.n,
    files: whole.files,
    stat: whole.stat,
    patch: whole.patch.truncated ? null : whole.patch.text,
    patchBytes: whole.patch.bytes,
    updatedAt: now,
  };
  // The run's `latestSnapshot` moves on when an iteration is decided: an attempt that is
  // interrupted now leaves the next attempt comparing with the same parent.
  return { writes: { insertSnapshots: rows, change }, change, reviewDiff: whole.patch.text };
}
