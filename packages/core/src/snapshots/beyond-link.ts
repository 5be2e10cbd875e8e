import { lstatSync } from "node:fs";
import { join } from "node:path";

/**
 * Whether `path` (relative to `root`, `/`-separated) lies beyond a symbolic link, or under a
 * file: one of its parent directories is there and is no real directory. Such a path is not in
 * the workspace as git sees it ("beyond a symbolic link"), whatever opening it would reach
 * through the link. A parent that is not there at all is no link: the path is simply absent.
 * `realDirs` caches what one pass has already looked at.
 */
export function isBeyondLink(
  root: string,
  path: string,
  realDirs: Map<string, boolean> = new Map(),
): boolean {
  for (let i = path.indexOf("/"); i !== -1; i = path.indexOf("/", i + 1)) {
    const dir = path.slice(0, i);
    let real = realDirs.get(dir);
    if (real === undefined) {
      try {
        real = lstatSync(join(root, dir)).isDirectory();
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        // Absent; or under a file, which the parent's own check says.
        real = code === "ENOENT" || code === "ENOTDIR";
      }
      realDirs.set(dir, real);
    }
    if (!real) return true;
  }
  return false;
}
