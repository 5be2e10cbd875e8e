import { createHash } from "node:crypto";
import { mkdir, rm, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * The git index of one workspace in a session's snapshot git dir: `<gitDir>/indexes/<sha1 of
 * the workspace's path>`, handed to git as GIT_INDEX_FILE with every command that has the
 * workspace as its work tree. One index per git dir was shared by the session's workspaces: a
 * run's baseline of one (`add -A`) rewrote it while a rollback of another was between its
 * `add -A` and its `read-tree -u --reset`, which then restored nothing. Each workspace is
 * written by one operation at a time (the holds see to it), so a lock is never contended.
 */
export function workspaceIndexFile(gitDir: string, workspace: string): string {
  const id = createHash("sha1").update(resolve(workspace)).digest("hex");
  return join(gitDir, "indexes", id);
}

/** How often a lock left on the index is looked at again. */
const LOCK_POLL_MS = 50;

/**
 * Readies a workspace's index before a git command writes it. A workspace without one starts
 * with none: `add -A` hashes every file (the single `index` of a git dir made before indexes
 * were per workspace is removed with its other indexes when the dir gets its attributes, see
 * ensureSnapshotAttributes; it was another workspace's, and its blobs were converted).
 *
 * A lock on the index (`<index>.lock`) is git's while it writes the index: it is waited for,
 * and removed only once it is older than `timeoutMs` — every git command here is killed by then,
 * so its writer is gone (a worker that died mid-command, or a git killed by its timeout).
 */
export async function prepareWorkspaceIndex(
  gitDir: string,
  index: string,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<void> {
  await mkdir(join(gitDir, "indexes"), { recursive: true });
  const lock = `${index}.lock`;
  for (;;) {
    const since = await lockAge(lock);
    if (since === null) return;
    if (since > timeoutMs) {
      await rm(lock, { force: true });
      return;
    }
    await sleep(LOCK_POLL_MS, undefined, signal ? { signal } : {});
  }
}

/** Removes the lock of a git that this process killed (it held the lock or nobody did). */
export async function releaseKilledLock(index: string): Promise<void> {
  await rm(`${index}.lock`, { force: true });
}

async function lockAge(lock: string): Promise<number | null> {
  try {
    return Date.now() - (await stat(lock)).mtimeMs;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw error;
  }
}
