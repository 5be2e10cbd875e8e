import {
  type BigIntStats,
  type Dir,
  type Dirent,
  lstatSync,
  opendirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
} from "node:fs";
import { join } from "node:path";
import ignore, { type Ignore } from "ignore";
import { isBeyondLink } from "./beyond-link";
import { type ObjectStore, writeLooseObject } from "./git-objects";
import { type GitIndex, statKey, type TreeFile, writeTree } from "./index-tree";

/**
 * `git add -A` + `write-tree` without the git process, for a workspace whose previous state
 * this process knows (from the index git wrote, or from its own previous scan): only files
 * whose stat data changed are read and hashed, as git does with its index. It is used for
 * the snapshot after every iteration — two spawns of git (each blocks the worker's event loop
 * for fork and exec) were a third of an iteration with quick commands.
 *
 * It honours what decides `git add -A` here (the snapshot git dirs have no config or excludes
 * of their own, and attributes that turn every conversion off, so that a workspace's
 * `.gitattributes` changes nothing: see SNAPSHOT_ATTRIBUTES; `gitEnv` turns off the user's
 * configuration): the workspace's `.gitignore` files (with the `ignore` package: git's pattern
 * rules, a deeper file taking precedence), tracked files staying tracked though ignored,
 * symlinks stored as links, the executable bit. Whatever only git should judge makes it return
 * null, and the caller runs git: a nested repository or gitlink, a name git treats specially
 * or that is not UTF-8, an unreadable file, a workspace of more than `maxFiles` files or a
 * file over `maxFileBytes` (git streams those).
 */

/** One file as the last scan (or git's index) saw it. */
export interface ScannedFile extends TreeFile {
  /** See `statKey`. */
  stat: string;
  /**
   * Whether an unchanged `stat` proves an unchanged content: not when the file was modified
   * shortly before it was hashed — a write within the file system's timestamp granularity
   * after the read would leave the same stat ("racy git").
   */
  trusted: boolean;
}

/** The workspace's files by path (relative, `/`-separated). */
export type WorkspaceFiles = Map<string, ScannedFile>;

export interface ScanLimits {
  /** @defaultValue 5000 */
  maxFiles?: number;
  /** @defaultValue 16 MiB */
  maxFileBytes?: number;
}

/** A file modified less than this before it was hashed is hashed again next time. */
const RACY_MARGIN_NS = 2_000_000_000n;

const nowNs = () => BigInt(Date.now()) * 1_000_000n;

/** The files of `git add -A`'s index as a scan's starting point; null when git must keep doing it. */
export function filesFromIndex(index: GitIndex, limits: ScanLimits = {}): WorkspaceFiles | null {
  if (index.entries.length > (limits.maxFiles ?? 5000)) return null;
  const files: WorkspaceFiles = new Map();
  for (const entry of index.entries) {
    const path = entry.path.toString("utf8");
    // Gitlinks are git's to update; a path that is not UTF-8 would not round-trip.
    if (entry.mode === 0o160000 || !Buffer.from(path).equals(entry.path)) return null;
    files.set(path, {
      path: Buffer.from(entry.path),
      mode: entry.mode,
      id: Buffer.from(entry.id),
      stat: entry.stat,
      trusted: entry.mtimeNs + RACY_MARGIN_NS < index.mtimeNs,
    });
  }
  return files;
}

/** Thrown inside the scan for anything git should judge; the scan then returns null. */
class LeaveToGit extends Error {}

interface IgnoreLevel {
  /** The directory of the `.gitignore`, relative, with a trailing `/` (or empty for the root). */
  base: string;
  rules: Ignore;
}

/** Git's rule: the deepest `.gitignore` with a matching pattern decides; its last match wins. */
function isIgnored(path: string, levels: IgnoreLevel[]): boolean {
  for (let i = levels.length - 1; i >= 0; i--) {
    const level = levels[i]!;
    const result = level.rules.test(path.slice(level.base.length));
    if (result.ignored) return true;
    if (result.unignored) return false;
  }
  return false;
}

/** Names git refuses or gives a meaning (`.git` and its NTFS aliases) or that did not decode. */
const SPECIAL_NAME = /^(\.git[. ]*|git~\d+)$/i;

/**
 * Scans the workspace against `previous` and writes the new blobs and trees into `gitDir`.
 * Returns the tree id and the files as they are now, or null (see above).
 */
export function scanWorkspace(
  workspace: string,
  previous: WorkspaceFiles,
  gitDir: string,
  store: ObjectStore,
  limits: ScanLimits = {},
): { tree: string; files: WorkspaceFiles; trackedIgnored: string } | null {
  const maxFiles = limits.maxFiles ?? 5000;
  const maxFileBytes = BigInt(limits.maxFileBytes ?? 16 * 1024 * 1024);
  const files: WorkspaceFiles = new Map();
  const toWrite: { file: ScannedFile; content: Buffer }[] = [];
  /** Files kept only because they are tracked: ignored now (what git's index must know). */
  const trackedIgnored: string[] = [];

  // Reads a file (or link) unless its stat says it is the one `previous` holds.
  const visit = (path: string, st: BigIntStats) => {
    const mode = st.isSymbolicLink()
      ? 0o120000
      : st.isFile()
        ? (st.mode & 0o100n) !== 0n
          ? 0o100755
          : 0o100644
        : null;
    if (mode === null) return; // a fifo, socket or device: git skips those too
    const key = statKey(st.ino, st.size, st.mtimeNs, st.ctimeNs);
    const before = previous.get(path);
    if (before?.trusted && before.stat === key && before.mode === mode) {
      files.set(path, before);
      return;
    }
    if (st.size > maxFileBytes) throw new LeaveToGit();
    const hashedAt = nowNs();
    const abs = join(workspace, path);
    const content =
      mode === 0o120000 ? readlinkSync(abs, { encoding: "buffer" }) : readFileSync(abs);
    const file: ScannedFile = {
      path: Buffer.from(path),
      mode,
      id: Buffer.alloc(0),
      stat: key,
      trusted: st.mtimeNs + RACY_MARGIN_NS < hashedAt,
    };
    files.set(path, file);
    toWrite.push({ file, content });
  };

  const walk = (dir: string, levels: IgnoreLevel[]) => {
    const entries: Dirent[] = readdirSync(join(workspace, dir), { withFileTypes: true });
    let here = levels;
    const gitignore = entries.find((e) => e.name === ".gitignore");
    if (gitignore) {
      if (!gitignore.isFile()) throw new LeaveToGit();
      const rules = ignore({ ignorecase: false }).add(
        readFileSync(join(workspace, dir, ".gitignore"), "utf8"),
      );
      here = [...levels, { base: dir, rules }];
    }
    for (const entry of entries) {
      const { name } = entry;
      if (name === ".git" && dir === "") continue; // the workspace's own repository
      if (SPECIAL_NAME.test(name) || name.includes("\uFFFD")) throw new LeaveToGit();
      const path = dir + name;
      if (entry.isDirectory()) {
        if (!isIgnored(`${path}/`, here)) walk(`${path}/`, here);
      } else if (entry.isFile() || entry.isSymbolicLink()) {
        const tracked = previous.has(path);
        if (tracked || !isIgnored(path, here)) {
          visit(path, lstatSync(join(workspace, path), { bigint: true }));
          if (tracked && here.length > 0 && isIgnored(path, here)) trackedIgnored.push(path);
        }
      }
      if (files.size > maxFiles) throw new LeaveToGit();
    }
  };

  try {
    walk("", []);
    // Tracked files the walk did not reach: deleted, or under a directory now ignored (git
    // keeps updating tracked files there). One whose directory became a symbolic link is gone
    // as git sees it: opening it would read through the link (out of the workspace, maybe).
    const realDirs = new Map<string, boolean>();
    for (const path of previous.keys()) {
      if (files.has(path) || isBeyondLink(workspace, path, realDirs)) continue;
      let st: BigIntStats;
      try {
        st = lstatSync(join(workspace, path), { bigint: true });
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === "ENOENT" || code === "ENOTDIR") continue; // deleted
        throw error;
      }
      if (!st.isDirectory()) {
        visit(path, st);
        trackedIgnored.push(path); // under a directory now ignored
      }
    }
  } catch (error) {
    if (error instanceof LeaveToGit) return null;
    const code = (error as NodeJS.ErrnoException).code;
    // Unreadable, or changed under the scan: git's `--ignore-errors` decides what to keep.
    if (code === "EACCES" || code === "EPERM" || code === "ENOENT" || code === "ELOOP") return null;
    throw error;
  }

  for (const { file, content } of toWrite)
    file.id = Buffer.from(writeLooseObject(gitDir, "blob", content, store), "hex");
  const sorted = [...files.values()].sort((a, b) => Buffer.compare(a.path, b.path));
  return {
    tree: writeTree(gitDir, sorted, store),
    files,
    trackedIgnored: trackedIgnored.sort().join("\0"),
  };
}

/** Whether `path` is a directory with nothing in it (one entry read, not the whole listing). */
export function isEmptyDir(path: string): boolean {
  let dir: Dir;
  try {
    dir = opendirSync(path);
  } catch {
    return false;
  }
  try {
    return dir.readSync() === null;
  } finally {
    dir.closeSync();
  }
}
