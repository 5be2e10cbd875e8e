import { lstatSync, realpathSync } from "node:fs";
import { dirname, join, relative } from "node:path";

function present(path: string): boolean {
  try {
    // No error built for the common answer (a new session's workspace is not there yet).
    return lstatSync(path, { throwIfNoEntry: false }) !== undefined;
  } catch {
    // ENOTDIR (a file on the way), EACCES: nothing of it to be found there either.
    return false;
  }
}

/**
 * The deepest part of `path` that exists, climbing no higher than `stop` (or `/`). A symlink
 * whose target does not exist counts as existing: it decides where the rest would be made.
 */
export function deepestExisting(path: string, stop?: string): string {
  let existing = path;
  while (existing !== stop && !present(existing) && dirname(existing) !== existing) {
    existing = dirname(existing);
  }
  return existing;
}

/**
 * Where `path` leads with the symlinks of its existing part followed (the libc realpath of that
 * part, joined with the rest), or `null` when that part is a symlink to nothing: a directory
 * made there would be made wherever the link points.
 */
export function resolvedPath(path: string): { existing: string; real: string } | null {
  const existing = deepestExisting(path);
  let real: string;
  try {
    real = realpathSync.native(existing);
  } catch {
    return null;
  }
  return { existing, real: existing === path ? real : join(real, relative(existing, path)) };
}

/**
 * Where `path` — stored with its symlinks followed — leads now, when not to itself: a symlink
 * put into it since (a directory swapped for a link out, a link to nothing), or null.
 */
export function leadsElsewhere(path: string): string | null {
  const now = resolvedPath(path);
  if (now?.real === path) return null;
  return now === null ? "a symlink to nothing" : now.real;
}

/** What is to be said of a workspace `path` that leads elsewhere now (leadsElsewhere), or null. */
export function movedAway(path: string, name = "the workspace"): string | null {
  const where = leadsElsewhere(path);
  return where === null
    ? null
    : `${name} ${path} leads to ${where} now (a symlink was put in its path)`;
}
