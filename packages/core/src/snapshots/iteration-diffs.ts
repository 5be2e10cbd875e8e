import {
  type CappedText,
  CHANGE_DIFF_OPTIONS,
  capDiff,
  parseChangeOutput,
  type SnapshotChange,
  splitPairs,
} from "./change-output";
import { diffAsText, snapshotChange, snapshotDiff } from "./snapshot-diffs";
import type { WorkspaceSnapshots } from "./workspace-snapshots";

export interface IterationDiffs {
  /** The iteration's own diff: its parent snapshot → its snapshot. */
  diff: CappedText;
  /** The run's change so far: the baseline → its snapshot. */
  change: SnapshotChange;
}

export interface IterationDiffsInput {
  sessionId: string;
  baseline: string;
  parent: string;
  head: string;
  diffCapBytes: number;
  patchCapBytes: number;
  signal?: AbortSignal;
}

/** One iteration's snapshot and the one before it (its parent, or the baseline). */
export interface SnapshotPair {
  parent: string;
  head: string;
}

export interface BatchDiffsInput extends Omit<IterationDiffsInput, "parent" | "head"> {
  /** Snapshots of iterations that followed one another, oldest first (at least one). */
  pairs: SnapshotPair[];
}

export interface BatchDiffs {
  /** Each pair's own diff, in the order of the pairs. */
  diffs: CappedText[];
  /** The run's change so far: the baseline → the last pair's snapshot. */
  change: SnapshotChange;
}

/** The two diffs of one snapshot after an iteration (see batchDiffs). */
export async function iterationDiffs(
  snapshots: WorkspaceSnapshots,
  input: IterationDiffsInput,
): Promise<IterationDiffs> {
  const { parent, head, ...rest } = input;
  const { diffs, change } = await batchDiffs(snapshots, { ...rest, pairs: [{ parent, head }] });
  return { diff: diffs[0] as CappedText, change };
}

/**
 * The diffs of snapshots after iterations — each one's own and the run's change up to the last
 * — from one git diff-tree where it can (the session's long-lived one, see
 * diff-tree-process.ts): `git diff-tree --stdin` reads the tree pairs and prints each diff
 * after its pair's line (with `-M`, as `git diff` detects renames; the same bytes as the
 * `git diff` of each pair — tested). Only the last snapshot's change is computed: the run
 * keeps one. A single iteration after the baseline needs only one diff. Whatever cannot be read
 * that way (a tree not at hand, output capped before the last pair) falls back to one
 * `git diff` per part.
 */
export async function batchDiffs(
  snapshots: WorkspaceSnapshots,
  input: BatchDiffsInput,
): Promise<BatchDiffs> {
  const { sessionId, baseline, pairs, diffCapBytes, patchCapBytes, signal } = input;
  const last = pairs.at(-1);
  if (last === undefined) throw new Error("no snapshot to diff");
  const separately = async (): Promise<BatchDiffs> => {
    // The change from the baseline is the diff of an iteration that followed it.
    const fromChange = (pair: SnapshotPair) => pair.parent === baseline && pair.head === last.head;
    const ownDiffs = async () => {
      const diffs: (CappedText | null)[] = [];
      for (const pair of pairs) {
        diffs.push(
          fromChange(pair)
            ? null
            : await snapshotDiff(
                snapshots,
                sessionId,
                pair.parent,
                pair.head,
                diffCapBytes,
                signal,
              ),
        );
      }
      return diffs;
    };
    const [change, diffs] = await Promise.all([
      snapshotChange(snapshots, sessionId, baseline, last.head, patchCapBytes, signal),
      ownDiffs(),
    ]);
    const { patch } = change;
    return {
      diffs: diffs.map(
        (diff) => diff ?? capDiff(Buffer.from(patch.text), patch.bytes, diffCapBytes),
      ),
      change,
    };
  };
  if (pairs.length === 1 && last.parent === baseline) return separately();

  const ids = [baseline, ...pairs.flatMap(({ parent, head }) => [parent, head])];
  const trees = await Promise.all(ids.map((id) => snapshots.treeOf(sessionId, id)));
  if (trees.some((tree) => tree === null)) return separately();
  const lines = pairs.map((_, i) => `${trees[1 + 2 * i]} ${trees[2 + 2 * i]}`);
  lines.push(`${trees[0]} ${trees.at(-1)}`);
  const result = await snapshots.diffTree(
    sessionId,
    ["-r", "-M", ...CHANGE_DIFF_OPTIONS],
    `${lines.join("\n")}\n`,
    // Every diff up to its cap, and room for the file lists and stats.
    pairs.length * diffCapBytes + patchCapBytes + 2 * 1024 * 1024,
    signal,
  );
  const parts = splitPairs(result.stdoutRaw, lines);
  if (parts === null) return separately();
  const owns: Buffer[] = [];
  for (const part of parts.slice(0, -1)) {
    const own = parseChangeOutput(part.output, false);
    if (own === null) return separately();
    owns.push(part.output.subarray(own.patchOffset));
  }
  const lastPart = parts.at(-1) as (typeof parts)[number];
  const whole = parseChangeOutput(lastPart.output, result.truncated);
  if (whole === null) return separately();
  const wholeStart = lastPart.offset + whole.patchOffset;
  const patch = capDiff(
    result.stdoutRaw.subarray(wholeStart),
    result.stdoutBytes - wholeStart,
    patchCapBytes,
  );
  // Bytes that are not UTF-8 would not survive as text (see diffAsText).
  const [patchText, ...diffs] = await Promise.all([
    diffAsText(snapshots, patch, sessionId, baseline, last.head, patchCapBytes, signal),
    ...owns.map((own, i) => {
      const { parent, head } = pairs[i] as SnapshotPair;
      const diff = capDiff(own, own.length, diffCapBytes);
      return diffAsText(snapshots, diff, sessionId, parent, head, diffCapBytes, signal);
    }),
  ]);
  return { diffs, change: { files: whole.files, stat: whole.stat, patch: patchText } };
}
