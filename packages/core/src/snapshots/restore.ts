import type { SnapshotTarget, WorkspaceSnapshots } from "./workspace-snapshots";

/** A path the restore changed back: rewritten (modified or deleted since), or removed (new since). */
export interface RestoredFile {
  path: string;
  change: "restored" | "removed";
}

export interface RestoreResult {
  /** The workspace as it was just before the restore (kept, so that nothing is lost for good). */
  before: string;
  files: RestoredFile[];
}

/**
 * Puts the workspace back exactly as it was in snapshot `to`: files modified or deleted since
 * are rewritten (content and mode), files created since are removed (with the directories
 * that become empty). The workspace's own `.git` is never touched, and neither are files its
 * `.gitignore` ignores (they are never part of a snapshot, so nothing says what they were).
 *
 * How: the current workspace is snapshotted first (under `refs/looprun/rollback/<runId>`, so
 * the run's own chain of snapshots is left alone), which leaves the index equal to it; then
 * `read-tree -u --reset <to>` moves index and work tree to the snapshot, deleting what the
 * snapshot does not hold.
 */
export async function restoreWorkspace(
  snapshots: WorkspaceSnapshots,
  target: SnapshotTarget,
  to: string,
  signal?: AbortSignal,
): Promise<RestoreResult> {
  const before = await snapshots.take(
    target,
    `before rollback to ${to}`,
    null,
    signal,
    `refs/looprun/rollback/${target.runId}`,
    { index: true },
  );
  const names = await snapshots.gitIn(
    target.sessionId,
    null,
    ["diff", "--name-status", "-z", "--no-renames", to, before],
    signal,
  );
  const parts = names.stdout.split("\0").filter((p) => p.length > 0);
  const files: RestoredFile[] = [];
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const status = parts[i]!;
    files.push({ path: parts[i + 1]!, change: status === "A" ? "removed" : "restored" });
  }
  if (files.length > 0) {
    await snapshots.gitIn(
      target.sessionId,
      target.workspace,
      ["read-tree", "-u", "--reset", to],
      signal,
    );
  }
  return { before, files };
}
