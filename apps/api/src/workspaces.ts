import { existsSync, mkdirSync, realpathSync } from "node:fs";
import { dirname, isAbsolute, join, normalize, relative, sep } from "node:path";
import { invalidRequest } from "./errors";

function inside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
}

const refuse = (message: string) => invalidRequest([{ path: "workspace", message }]);

/**
 * Resolves a run's workspace (relative to `root`) and creates it. Absolute paths, `..` and
 * symlinks that lead out of the root are refused; the check is on real paths, component by
 * component, before anything is created.
 */
export function prepareWorkspace(root: string, name: string): string {
  if (name.includes("\0")) throw refuse("must not contain NUL bytes");
  if (isAbsolute(name)) throw refuse("must be a path relative to WORKSPACES_ROOT");
  const normalized = normalize(name);
  if (normalized === ".." || normalized.startsWith(`..${sep}`)) {
    throw refuse("must stay inside WORKSPACES_ROOT");
  }
  mkdirSync(root, { recursive: true });
  const realRoot = realpathSync(root);
  const target = join(realRoot, normalized);
  // The deepest existing ancestor decides where mkdir would really write.
  let existing = target;
  while (!existsSync(existing)) existing = dirname(existing);
  if (!inside(realRoot, realpathSync(existing))) throw refuse("must stay inside WORKSPACES_ROOT");
  mkdirSync(target, { recursive: true });
  const real = realpathSync(target);
  if (!inside(realRoot, real)) throw refuse("must stay inside WORKSPACES_ROOT");
  return real;
}
