import { realpathSync as realpathSyncJs, statSync } from "node:fs";
import { isAbsolute, join, normalize, relative, sep } from "node:path";
import { deepestExisting, makeDirs, messageOf, resolvedPath } from "@looprun/core";
import { invalidRequest } from "./errors";

function inside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
}

// The libc realpath: one call, where node's JS version lstat()s every component of the path.
const realpathSync = realpathSyncJs.native;

const realRoots = new Map<string, string>();

/** The root, created and resolved once per process: every submit asked for both. */
function realRootOf(root: string): string {
  let real = realRoots.get(root);
  if (real === undefined) {
    makeDirs(root);
    real = realpathSync(root);
    realRoots.set(root, real);
  }
  return real;
}

/**
 * The root made ready at start-up, so that a root that cannot be one (a file, a place that
 * cannot be written) stops the API with its setting's name, not every submit with a 500.
 */
export function prepareWorkspacesRoot(root: string): void {
  try {
    realRootOf(root);
  } catch (error) {
    throw new Error(`WORKSPACES_ROOT: cannot use ${root} as a directory: ${messageOf(error)}`, {
      cause: error,
    });
  }
}

/** `x/` is the workspace `x`: stored, and matched, as one. */
const withoutTrailingSlash = (path: string) => path.replace(/(?<=.)\/+$/, "");

const NOT_THE_ROOT = "must be a directory under WORKSPACES_ROOT, not the root itself";

const refuse = (message: string) => invalidRequest([{ path: "workspace", message }]);

/**
 * Resolves a run's workspace (relative to `root`) to the path it will have. Absolute paths,
 * `..` and symlinks that lead out of the root are refused; the check is on real paths: the
 * deepest part of the path that exists already decides where the rest would be created.
 * Nothing is created here: the worker that starts the run creates the directory (on its own
 * host's file system, which is the one that counts), so a submit costs no directory write —
 * on a busy disk, creating one per submit took a fifth of the API's time (bench, submit path).
 */
export function resolveWorkspace(root: string, name: string): string {
  if (name.includes("\0")) throw refuse("must not contain NUL bytes");
  if (isAbsolute(name)) throw refuse("must be a path relative to WORKSPACES_ROOT");
  const normalized = withoutTrailingSlash(normalize(name));
  if (normalized === ".." || normalized.startsWith(`..${sep}`)) {
    throw refuse("must stay inside WORKSPACES_ROOT");
  }
  const realRoot = realRootOf(root);
  const resolved = realPathUnder(realRoot, join(realRoot, normalized));
  // The root holds every session's workspace: a run there, or a rollback of it, would touch them all.
  if (resolved === realRoot) throw refuse(NOT_THE_ROOT);
  return resolved;
}

/**
 * The workspace a session of this id has if it was made without one named — what
 * `resolveWorkspace` gives for the id — or undefined where that refuses the id as a name (a
 * session that exists may still have a workspace of its own: the caller looks it up).
 */
export function guessWorkspace(root: string, sessionId: string): string | undefined {
  try {
    return resolveWorkspace(root, sessionId);
  } catch {
    return undefined;
  }
}

/**
 * Where `target` (a path under the real root) lies with its symlinks followed: the deepest part
 * of it that exists decides. Refused when that leads out of the root (with `outside()`) or
 * under a file.
 */
function realPathUnder(
  realRoot: string,
  target: string,
  outside = () => refuse("must stay inside WORKSPACES_ROOT"),
): string {
  const existing = deepestExisting(target, realRoot);
  // Nothing of the path exists yet (a new session's workspace): it will be made inside the
  // root (by the worker, `mkdir -p`, the root too if it went away since start-up).
  if (existing === realRoot) return target;
  let real: string;
  try {
    real = realpathSync(existing);
  } catch {
    // A symlink to nothing: the directory would be made wherever it points, maybe outside.
    throw refuse(`${relative(realRoot, existing)} is a symlink whose target does not exist`);
  }
  if (!inside(realRoot, real)) throw outside();
  if (!statSync(real).isDirectory()) throw refuse(`${relative(realRoot, real)} is not a directory`);
  return existing === target ? real : join(real, relative(existing, target));
}

/**
 * The workspace a filter names (`GET /api/stats/tools?workspace=`), as runs store theirs: a
 * name under `root` resolved as a submit resolves it (symlinks followed: WORKSPACES_ROOT may be
 * reached through one), an absolute path with the symlinks of its part that exists followed.
 */
export function resolveWorkspaceFilter(root: string, name: string): string {
  if (!isAbsolute(name)) return resolveWorkspace(root, name);
  if (name.includes("\0")) throw refuse("must not contain NUL bytes");
  // The deepest part of the path that exists decides (a run's workspace may not exist yet).
  const path = normalize(name);
  return resolvedPath(path)?.real ?? path;
}

/**
 * Where a stored workspace lies: `root` (WORKSPACES_ROOT itself, as an older looprun stored
 * `"workspace": "."`), `outside` the root (one that changed), or `inside` it — with the path as
 * compared (one stored before names were normalised may end with a slash) and the real root.
 */
function storedPlace(
  root: string,
  stored: string,
): { place: "root" | "outside" | "inside"; workspace: string; realRoot: string } {
  const workspace = withoutTrailingSlash(stored);
  const realRoot = realRootOf(root);
  const place =
    workspace === realRoot ? "root" : inside(realRoot, workspace) ? "inside" : "outside";
  return { place, workspace, realRoot };
}

/**
 * Why a run's stored workspace is no place to restore a snapshot into, or null: WORKSPACES_ROOT
 * itself (a restore would rewrite every session's workspace), or outside the root.
 */
export function unrestorableWorkspace(root: string, stored: string): string | null {
  const { place, workspace } = storedPlace(root, stored);
  if (place === "root") {
    return `the run's workspace is WORKSPACES_ROOT itself (kept from an older looprun): a restore would rewrite every session's workspace`;
  }
  if (place === "outside") {
    return `the run's workspace ${workspace} is not inside WORKSPACES_ROOT (any more)`;
  }
  return null;
}

/**
 * A session's stored workspace, checked again as a named one is: it may have become a symlink
 * out of WORKSPACES_ROOT since (a command can replace a directory with a link), lie outside a
 * root that changed, or be the root itself (stored before that was refused). Resolved as a
 * submit resolves a name (symlinks followed).
 */
export function checkSessionWorkspace(root: string, stored: string): string {
  const { place, workspace, realRoot } = storedPlace(root, stored);
  if (place === "root") {
    throw refuse(
      "the session's workspace is WORKSPACES_ROOT itself (kept from an older looprun): name a directory under it",
    );
  }
  const outside = () =>
    refuse(
      `the session's workspace ${workspace} is not inside WORKSPACES_ROOT (any more): name a directory under it`,
    );
  if (place === "outside") throw outside();
  const resolved = realPathUnder(realRoot, workspace, outside);
  if (resolved === realRoot) throw refuse(NOT_THE_ROOT);
  return resolved;
}
