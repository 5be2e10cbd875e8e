import {
  type CappedText,
  CHANGE_DIFF_OPTIONS,
  capDiff,
  parseChangeOutput,
  type SnapshotChange,
  splitTwoPairs,
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

/**
 * The two diffs of a snapshot after an iteration, from one git diff-tree where it can (the
 * session's long-lived one, see diff-tree-process.ts): `git diff-tree --stdin` reads both tree
 * pairs and prints each diff after its pair's line (with
 * `-M`, as `git diff` detects renames; the same bytes as the `git diff` of each pair — tested).
 * Iteration 1 (the parent is the baseline) needs only one diff. Whatever cannot be read that
 * way (a tree not at hand, output capped before the second diff) falls back to one `git diff`
 * per part.
 */
export async function iterationDiffs(
  snapshots: WorkspaceSnapshots,
  input: IterationDiffsInput,
): Promise<IterationDiffs> {
  const { sessionId, baseline, parent, head, diffCapBytes, patchCapBytes, signal } = input;
  const separately = async (): Promise<IterationDiffs> => {
    const [change, diff] = await Promise.all([
      snapshotChange(snapshots, sessionId, baseline, head, patchCapBytes, signal),
      parent === baseline
        ? null
        : snapshotDiff(snapshots, sessionId, parent, head, diffCapBytes, signal),
    ]);
    const own = diff ?? capDiff(Buffer.from(change.patch.text), change.patch.bytes, diffCapBytes);
    return { change, diff: own };
  };
  if (parent === baseline) return separately();

  const [baseTree, parentTree, headTree] = await Promise.all(
    [baseline, parent, head].map((id) => snapshots.treeOf(sessionId, id)),
  );
  if (baseTree === null || parentTree === null || headTree === null) return separately();
  const first = `${parentTree} ${headTree}`;
  const second = `${baseTree} ${headTree}`;
  const result = await snapshots.diffTree(
    sessionId,
    ["-r", "-M", ...CHANGE_DIFF_OPTIONS],
    `${first}\n${second}\n`,
    // Both diffs up to their caps, and room for the file lists and stats.
    diffCapBytes + patchCapBytes + 2 * 1024 * 1024,
    signal,
  );
  const parts = splitTwoPairs(result.stdoutRaw, first, second);
  if (parts === null) return separately();
  const own = parseChangeOutput(parts.first, false);
  const whole = parseChangeOutput(parts.second, result.truncated);
  if (own === null || whole === null) return separately();
  const ownPatch = parts.first.subarray(own.patchOffset);
  const wholeStart = parts.secondOffset + whole.patchOffset;
  const diff = capDiff(ownPatch, ownPatch.length, diffCapBytes);
  const patch = capDiff(
    result.stdoutRaw.subarray(wholeStart),
    result.stdoutBytes - wholeStart,
    patchCapBytes,
  );
  // Bytes that are not UTF-8 would not survive as text (see diffAsText).
  const [ownText, patchText] = await Promise.all([
    diffAsText(snapshots, diff, sessionId, parent, head, diffCapBytes, signal),
    diffAsText(snapshots, patch, sessionId, baseline, head, patchCapBytes, signal),
  ]);
  return { diff: ownText, change: { files: whole.files, stat: whole.stat, patch: patchText } };
}
