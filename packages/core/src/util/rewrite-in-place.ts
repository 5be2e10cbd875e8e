import { closeSync, ftruncateSync, openSync, writeSync } from "node:fs";

/**
 * Overwrites an existing file from its start and cuts it to `content`'s length; returns false
 * when there is no such file. For small files rewritten often (a snapshot's ref, a run's
 * prompt): their blocks are kept, where writing a new file over them, or truncating them
 * first, frees them and takes new ones — 0.15–0.2 ms on a disk mounted with `discard` (this
 * project's bench machine), against 0.01 ms in place. Not atomic for readers of the file:
 * for files only their writer reads, or whose content is one short write.
 */
export function rewriteInPlace(path: string, content: Buffer): boolean {
  let fd: number;
  try {
    fd = openSync(path, "r+");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw error;
  }
  try {
    let written = 0;
    while (written < content.length)
      written += writeSync(fd, content, written, content.length - written, written);
    ftruncateSync(fd, content.length);
  } finally {
    closeSync(fd);
  }
  return true;
}
