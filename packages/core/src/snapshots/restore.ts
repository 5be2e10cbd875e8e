import { lstatSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { isBeyondLink } from "./beyond-link";
import { GitError } from "./git";
import type { SnapshotTarget, WorkspaceSnapshots } from "./workspace-snapshots";

const GITLINK = "160000";

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
 * the run's own chain of snapshots is left alone; its parent is the run's previous rollback's),
 * which leaves the index equal to it; then `read-tree -u --reset <to>` moves index and work
 * tree to the snapshot, deleting what the snapshot does not hold.
 *
 * A path is removed only if it is not ignored by the rules restored with `to`: a file that
 * existed, ignored, before the run is in `before` if the run edited `.gitignore` so that it no
 * longer is, and `read-tree` deletes it. Such paths are written back from `before` (work tree
 * only: they stay out of the index, as the ignored files they are) and are not reported.
 */
export async function restoreWorkspace(
  snapshots: WorkspaceSnapshots,
  target: SnapshotTarget,
  to: string,
  signal?: AbortSignal,
): Promise<RestoreResult> {
  // Each rollback's `before` follows the previous one's: the ref keeps them all reachable.
  const ref = `refs/looprun/rollback/${target.runId}`;
  const previous = (
    await snapshots.gitIn(
      target.sessionId,
      null,
      ["for-each-ref", "--format=%(objectname)", ref],
      signal,
    )
  ).stdout.trim();
  const before = await snapshots.take(
    target,
    `before rollback to ${to}`,
    previous === "" ? null : previous,
    signal,
    ref,
    { index: true },
  );
  const raw = await snapshots.gitIn(
    target.sessionId,
    null,
    ["diff", "--raw", "-z", "--no-renames", to, before],
    signal,
  );
  // `:<mode in to> <mode in before> <id> <id> <status>` and the path, for each changed path.
  const parts = raw.stdout.split("\0").filter((p) => p.length > 0);
  const files: RestoredFile[] = [];
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const [modeTo, modeBefore, , , status] = parts[i]!.slice(1).split(" ");
    // A nested repository (a gitlink): read-tree changes nothing in it, nor removes one.
    if (modeTo === GITLINK || modeBefore === GITLINK) continue;
    files.push({ path: parts[i + 1]!, change: status === "A" ? "removed" : "restored" });
  }
  if (files.length === 0) return { before, files };
  // A directory where `to` has a file: read-tree clears it out of the way, with the ignored
  // files in it (no snapshot holds them). They cannot stay; they are told as removed.
  const cleared = await ignoredInDirectoriesOf(
    snapshots,
    target,
    files.filter((f) => f.change === "restored").map((f) => f.path),
    signal,
  );
  await snapshots.gitIn(
    target.sessionId,
    target.workspace,
    ["read-tree", "-u", "--reset", to],
    signal,
  );
  const removed = files.filter((f) => f.change === "removed").map((f) => f.path);
  const kept = new Set(await ignoredPaths(snapshots, target, removed, signal));
  if (kept.size > 0) {
    await snapshots.gitIn(
      target.sessionId,
      target.workspace,
      [
        "--literal-pathspecs",
        "-C",
        target.workspace,
        "restore",
        `--source=${before}`,
        "--worktree",
        "--pathspec-from-file=-",
        "--pathspec-file-nul",
      ],
      signal,
      { stdin: [...kept].join("\0") },
    );
  }
  return {
    before,
    files: [
      ...files.filter((f) => f.change !== "removed" || !kept.has(f.path)),
      ...cleared.map((path) => ({ path, change: "removed" as const })),
    ],
  };
}

/** The ignored files inside those of `paths` that are directories in the workspace now. */
async function ignoredInDirectoriesOf(
  snapshots: WorkspaceSnapshots,
  target: SnapshotTarget,
  paths: string[],
  signal?: AbortSignal,
): Promise<string[]> {
  const inside: string[] = [];
  const realDirs = new Map<string, boolean>();
  for (const path of paths) {
    if (isBeyondLink(target.workspace, path, realDirs)) continue;
    const dir = join(target.workspace, path);
    let isDir = false;
    try {
      isDir = lstatSync(dir).isDirectory();
    } catch {
      continue;
    }
    if (!isDir) continue;
    for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
      if (entry.isDirectory()) continue;
      // `parentPath` from Node 20.12; `path` before it (Node 20.11 is supported).
      const parent = entry as { parentPath?: string; path?: string };
      inside.push(
        relative(target.workspace, join(parent.parentPath ?? parent.path ?? dir, entry.name)),
      );
    }
  }
  return ignoredPaths(snapshots, target, inside, signal);
}

/** Which of `paths` the workspace's ignore rules (as restored) ignore, tracked or not. */
async function ignoredPaths(
  snapshots: WorkspaceSnapshots,
  target: SnapshotTarget,
  paths: string[],
  signal?: AbortSignal,
): Promise<string[]> {
  // One whose directory is a symbolic link now (as restored) is gone, not ignored: git refuses
  // to look at it ("beyond a symbolic link").
  const realDirs = new Map<string, boolean>();
  const here = paths.filter((path) => !isBeyondLink(target.workspace, path, realDirs));
  if (here.length === 0) return [];
  try {
    const result = await snapshots.gitIn(
      target.sessionId,
      target.workspace,
      ["-C", target.workspace, "check-ignore", "--no-index", "-z", "--stdin"],
      signal,
      { stdin: `${here.join("\0")}\0` },
    );
    return result.stdout.split("\0").filter((p) => p.length > 0);
  } catch (error) {
    // Exit status 1: none of them is ignored.
    if (error instanceof GitError && error.result.exitCode === 1) return [];
    throw error;
  }
}
