import { constants, existsSync } from "node:fs";
import { type FileHandle, lstat, open, readlink, realpath, unlink } from "node:fs/promises";
import { isWithin } from "./confine-path";
import { PathConfinementError } from "./errors";

/** Where the kernel tells an open file's path (Linux); elsewhere the check after opening is skipped. */
const FD_PATHS = "/proc/self/fd";
const canCheck = existsSync(FD_PATHS);

/**
 * Opens a file that confinePath placed inside the workspace, and checks the file opened is
 * still there: between the check and the open, a command of the run may have swapped a
 * directory of the path for a symlink out (a race it can win in a loop). The last component is
 * never followed (O_NOFOLLOW); the opened file's own path, as the kernel tells it, must lie in
 * the workspace, else the handle is closed — a file this open created there is removed — and
 * the call refused. Nothing is read or written before the check: a writer truncates after it.
 */
export async function openConfined(
  root: string,
  absolute: string,
  path: string,
  how: "read" | "write" | "create",
): Promise<FileHandle> {
  const base = how === "read" ? constants.O_RDONLY | constants.O_NONBLOCK : constants.O_WRONLY;
  const flags = base | constants.O_NOFOLLOW;
  let created = false;
  let file: FileHandle;
  if (how === "create") {
    try {
      file = await open(absolute, flags | constants.O_CREAT | constants.O_EXCL, 0o666);
      created = true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      file = await open(absolute, flags);
    }
  } else {
    file = await open(absolute, flags);
  }
  if (!canCheck) return file;
  try {
    const opened = await readlink(`${FD_PATHS}/${file.fd}`);
    const realRoot = await realpath(root);
    if (isWithin(realRoot, opened)) return file;
    // Removed only if the name still is the file this open made (the directories out there
    // are anyone's: one may have been swapped again meanwhile).
    if (created) await unlinkIfSame(opened, file);
    throw new PathConfinementError(
      "outside_workspace",
      path,
      `access denied: ${path} led to ${opened} when it was opened (a symlink was put in its path meanwhile), outside the workspace ${realRoot}`,
    );
  } catch (error) {
    await file.close();
    throw error;
  }
}

/** Removes `path` if it still names the file `file` is open on. */
async function unlinkIfSame(path: string, file: FileHandle): Promise<void> {
  try {
    const [named, opened] = await Promise.all([lstat(path), file.stat()]);
    if (named.dev === opened.dev && named.ino === opened.ino) await unlink(path);
  } catch {
    // Gone already, or not ours to look at: nothing to remove.
  }
}
