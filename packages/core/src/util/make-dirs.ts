import { existsSync, mkdirSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";

/**
 * `mkdir -p`, one directory at a time. Node's recursive mkdir never returns for a path under
 * a directory that refuses new entries with ENOENT (`/proc/nope/x`: it tries the parent again
 * for ever); this one throws the first refusal. Throws ENOTDIR when `path` is there but no
 * directory.
 */
export function makeDirs(path: string): void {
  const missing: string[] = [];
  let dir = resolve(path);
  while (!existsSync(dir)) {
    missing.push(dir);
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  for (const each of missing.reverse()) {
    try {
      mkdirSync(each);
    } catch (error) {
      // Made meanwhile (another process): as good.
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
  }
  if (!statSync(path).isDirectory()) {
    throw Object.assign(new Error(`ENOTDIR: not a directory, '${path}'`), { code: "ENOTDIR" });
  }
}
