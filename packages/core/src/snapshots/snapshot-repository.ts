import {
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join, relative } from "node:path";

/**
 * A session's snapshot repository, made without a git process: what of `git init --bare` git
 * needs (HEAD, config, refs/), with `objects` a link to the object store that every
 * session's repository under the same root shares (`<root>/objects`).
 *
 * Shared, because a new session's first snapshots were mostly directories to make: git keeps
 * a loose object under `objects/<first two hex digits>/`, so a fresh store makes a directory
 * for nearly every object it writes, and on this project's bench machine making one costs more
 * than writing the object (0.05–0.26 ms). A shared store has them after its first sessions; a
 * file that several sessions hold is stored once.
 *
 * No repository may then prune what it does not reach itself — the other sessions' snapshots:
 * each says `extensions.preciousObjects` (git refuses `prune` and `repack -d` in it, and its
 * `gc` drops nothing) and `gc.auto = 0`. A repository made before (its own `objects`
 * directory) stays as it is.
 */

/** The object store of every session's snapshots under `root`. */
export function sharedObjectsDir(root: string): string {
  return join(root, "objects");
}

/** A snapshot git dir's `HEAD` (no branch is ever written: the refs are `refs/looprun/…`). */
export const HEAD = "ref: refs/heads/main\n";

/** A snapshot git dir's `config`. */
export const CONFIG = [
  "[core]",
  "\trepositoryformatversion = 1",
  "\tfilemode = true",
  "\tbare = true",
  "[extensions]",
  "\tpreciousObjects = true",
  "[gc]",
  "\tauto = 0",
  "",
].join("\n");

/**
 * The attributes of every path in a snapshot git dir (`info/attributes`, which outranks the
 * workspace's `.gitattributes`): no conversion on the way in or out — no line endings
 * (`text`, `eol`, and the older `crlf`), no `filter` driver (e.g. LFS), no `ident`
 * expansion, no `working-tree-encoding`. A snapshot holds the bytes of the files, and a
 * restore writes those bytes back: with a workspace's `* text=auto`, CRLF files were stored
 * with LF and restored so.
 */
export const SNAPSHOT_ATTRIBUTES = "* -text -eol -crlf -filter -ident -working-tree-encoding\n";

/**
 * Writes `info/attributes` of `gitDir` (see SNAPSHOT_ATTRIBUTES) unless it is there already:
 * for repositories made before it was, too. Their indexes go with it: an index holds each
 * file's blob as it was converted then, and `add -A` hashes again only files whose stat data
 * changed — an unchanged CRLF file would keep its LF blob in every later snapshot. Without an
 * index the next `add -A` hashes every file as it is. Returns whether it wrote the file.
 */
export function ensureSnapshotAttributes(gitDir: string): boolean {
  const file = join(gitDir, "info", "attributes");
  try {
    if (readFileSync(file, "utf8") === SNAPSHOT_ATTRIBUTES) return false;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  rmSync(join(gitDir, "index"), { force: true });
  rmSync(join(gitDir, "indexes"), { recursive: true, force: true });
  mkdirSync(join(gitDir, "info"), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, SNAPSHOT_ATTRIBUTES);
  renameSync(tmp, file);
  return true;
}

/**
 * Makes the repository `gitDir` (`<root>/<session>.git`). Each step may be repeated (a maker
 * that died half-way, two at once); HEAD comes last: a repository with a HEAD is complete.
 */
export function initSnapshotRepository(root: string, gitDir: string): void {
  const objects = sharedObjectsDir(root);
  if (!existsSync(join(objects, "pack"))) {
    mkdirSync(join(objects, "info"), { recursive: true });
    mkdirSync(join(objects, "pack"), { recursive: true });
  }
  // git needs `refs/`; the refs written here go under `refs/looprun/`.
  mkdirSync(join(gitDir, "refs"), { recursive: true });
  try {
    // Relative: the root may move.
    symlinkSync(relative(gitDir, objects), join(gitDir, "objects"));
  } catch (error) {
    // Made by an earlier try — or a directory of git's own, whose objects stay where they are.
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  // Written as it is: until HEAD is there, a maker that died half-way is followed by another.
  writeFileSync(join(gitDir, "config"), CONFIG);
  ensureSnapshotAttributes(gitDir);
  // Renamed into place: git reads a repository whose HEAD is there, whole.
  const head = join(gitDir, "HEAD");
  const tmp = `${head}.${process.pid}.tmp`;
  writeFileSync(tmp, HEAD);
  renameSync(tmp, head);
}
