import { realpathSync } from "node:fs";
import { isAbsolute, relative, resolve, sep } from "node:path";

/**
 * Whether a path lies inside `root` (or is it): a run of this worker's cell, when workers of
 * several hosts share one database (README, "Scaling beyond one machine"). The API stores a
 * run's workspace with symlinks resolved: a root reached through one is known by its real path
 * too (and by its own, for rows stored before).
 */
export function inside(root: string): (path: string) => boolean {
  const bases = new Set([resolve(root)]);
  try {
    bases.add(realpathSync.native(root));
  } catch {
    // Not there (yet): its runs are named by the path as given.
  }
  return (path) => {
    const target = resolve(path);
    for (const base of bases) {
      const rel = relative(base, target);
      if (rel === "" || (rel !== ".." && !rel.startsWith(`..${sep}`) && !isAbsolute(rel))) {
        return true;
      }
    }
    return false;
  };
}
