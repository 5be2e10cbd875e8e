import { isAbsolute, relative, resolve, sep } from "node:path";

/**
 * Whether a path lies inside `root` (or is it): a run of this worker's cell, when workers of
 * several hosts share one database (README, "Scaling beyond one machine").
 */
export function inside(root: string): (path: string) => boolean {
  const base = resolve(root);
  return (path) => {
    const rel = relative(base, resolve(path));
    return rel === "" || (rel !== ".." && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
  };
}
