import type { Dirent } from "node:fs";
import { readdir } from "node:fs/promises";
import { join, relative } from "node:path";
import { messageOf } from "../util/errors";
import { globMatcher } from "./glob-pattern";

/** `search_files` stops after this many matches. */
export const MAX_SEARCH_RESULTS = 1000;

/** `list_directory` lists this many entries (the first by name) and counts the rest. */
export const MAX_LISTED_ENTRIES = 2000;

/** A readable sentence for a file-system error, naming the path the model gave. */
export function describeFsError(error: unknown, path: string): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  switch (code) {
    case "ENOENT":
      return `no such file or directory: ${path}`;
    case "EISDIR":
      return `${path} is a directory, not a file`;
    case "ENOTDIR":
      return `${path} is not a directory (or a component of it is a file)`;
    case "EACCES":
    case "EPERM":
      return `permission denied: ${path}`;
    case "EEXIST":
      return `${path} already exists`;
    case "ELOOP":
      return `${path} is a symlink now (it was put there meanwhile): not followed`;
    default:
      return `${path}: ${messageOf(error)}`;
  }
}

/**
 * A directory's entries, one a line, by name: at most MAX_LISTED_ENTRIES, then a line saying
 * how many more there are (a listing of 200,000 long names was past what the server's
 * transport carries, and it closed the workspace server for the rest of the iteration).
 */
export async function listDirectory(absolute: string): Promise<string> {
  const entries = await readdir(absolute, { withFileTypes: true });
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const listed = entries
    .slice(0, MAX_LISTED_ENTRIES)
    .map((e) => `${e.isDirectory() ? "[DIR]" : "[FILE]"} ${e.name}`);
  const more = entries.length - listed.length;
  if (more > 0) {
    listed.push(
      `[… ${more} more entries not listed (${entries.length} in all); search_files finds names by pattern …]`,
    );
  }
  return listed.join("\n");
}

/**
 * Walks `start` (already confined) and returns matching paths relative to `root`. Symlinked
 * directories are not descended into, so the walk never leaves the workspace; entries
 * matching an exclude pattern are skipped with everything below them.
 */
export async function searchFiles(
  root: string,
  start: string,
  pattern: string,
  excludePatterns: readonly string[],
): Promise<{ matches: string[]; truncated: boolean }> {
  const matches: string[] = [];
  const isMatch = globMatcher(pattern);
  const excluders = excludePatterns.map(globMatcher);
  let truncated = false;

  const walk = async (dir: string): Promise<void> => {
    let entries: Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      return; // unreadable directories are skipped, as `find` would after a warning
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      if (truncated) return;
      const full = join(dir, entry.name);
      const fromStart = relative(start, full);
      if (excluders.some((excluded) => excluded(fromStart))) continue;
      if (isMatch(fromStart)) {
        if (matches.length >= MAX_SEARCH_RESULTS) {
          truncated = true;
          return;
        }
        matches.push(relative(root, full));
      }
      if (entry.isDirectory()) await walk(full);
    }
  };
  await walk(start);
  return { matches, truncated };
}
