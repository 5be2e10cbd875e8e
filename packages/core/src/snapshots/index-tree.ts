import { readFile, stat } from "node:fs/promises";
import { type ObjectStore, writeLooseObject } from "./git-objects";

/**
 * `git write-tree` without the git process: reads the index that `git add -A` just wrote and
 * writes its tree objects (gitformat-index, version 2 or 3; gitformat-loose). Returns null
 * for anything it does not handle — another index version, unmerged or sparse entries — and
 * the caller runs `git write-tree` instead. Tree ids that exist are remembered per git dir,
 * so an unchanged directory costs neither a write nor a look at the disk.
 */
export async function writeTreeFromIndex(
  gitDir: string,
  store: ObjectStore,
  indexFile: string,
): Promise<{ tree: string; index: GitIndex } | null> {
  const index = await readGitIndex(indexFile);
  if (index === null) return null;
  return { tree: writeTree(gitDir, index.entries, store), index };
}

/** One file of a tree: its path (bytes relative to the work tree, `/`-separated), mode and blob. */
export interface TreeFile {
  path: Buffer;
  mode: number;
  id: Buffer;
}

/** An index entry: a tree file with the stat data git recorded for it (see `statKey`). */
export interface IndexEntry extends TreeFile {
  stat: string;
  /** Its modification time as git recorded it (ns since the epoch). */
  mtimeNs: bigint;
}

/** The index as `git add -A` left it, and the index file's own mtime (ns since the epoch). */
export interface GitIndex {
  entries: IndexEntry[];
  mtimeNs: bigint;
}

/**
 * An index file of a snapshot git dir (see workspace-index.ts), or null when it holds what
 * this does not handle. No index file is an empty index (`git add -A` of an empty work tree
 * writes none).
 */
export async function readGitIndex(file: string): Promise<GitIndex | null> {
  let index: Buffer;
  let mtimeNs: bigint;
  try {
    [index, mtimeNs] = await Promise.all([
      readFile(file),
      stat(file, { bigint: true }).then((s) => s.mtimeNs),
    ]);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT" ? { entries: [], mtimeNs: 0n } : null;
  }
  const entries = parseIndex(index);
  return entries === null ? null : { entries, mtimeNs };
}

const U32 = 0xffffffffn;

/**
 * The stat data by which an unchanged file is known, as git's index keeps it: inode, size and
 * the modification and change times (seconds and nanoseconds), each cut to 32 bits. The
 * same key from `lstat` and from an index entry means git would not look at the file again.
 */
export function statKey(ino: bigint, size: bigint, mtimeNs: bigint, ctimeNs: bigint): string {
  const time = (ns: bigint) => `${(ns / 1_000_000_000n) & U32}.${ns % 1_000_000_000n}`;
  return `${ino & U32}:${size & U32}:${time(mtimeNs)}:${time(ctimeNs)}`;
}

/** Writes the tree objects of `files` (sorted by path bytes, as git's index is); returns the root tree id. */
export function writeTree(gitDir: string, files: TreeFile[], store: ObjectStore): string {
  return writeDirectory(gitDir, files, 0, files.length, Buffer.alloc(0), store);
}

const SIGNATURE = 0x44495243; // "DIRC"
const ENTRY_FIXED = 62; // ctime, mtime, dev, ino, mode, uid, gid, size (4 each, times 8), id (20), flags (2)

function parseIndex(b: Buffer): IndexEntry[] | null {
  if (b.length < 12 || b.readUInt32BE(0) !== SIGNATURE) return null;
  const version = b.readUInt32BE(4);
  if (version !== 2 && version !== 3) return null;
  const count = b.readUInt32BE(8);
  const entries: IndexEntry[] = [];
  let at = 12;
  for (let i = 0; i < count; i++) {
    if (at + ENTRY_FIXED > b.length) return null;
    const mtimeNs =
      BigInt(b.readUInt32BE(at + 8)) * 1_000_000_000n + BigInt(b.readUInt32BE(at + 12));
    const statData = statKey(
      BigInt(b.readUInt32BE(at + 20)),
      BigInt(b.readUInt32BE(at + 36)),
      mtimeNs,
      BigInt(b.readUInt32BE(at)) * 1_000_000_000n + BigInt(b.readUInt32BE(at + 4)),
    );
    const mode = b.readUInt32BE(at + 24);
    const id = b.subarray(at + 40, at + 60);
    const flags = b.readUInt16BE(at + 60);
    const stage = (flags >> 12) & 0x3;
    const extended = (flags & 0x4000) !== 0;
    if (stage !== 0 || (extended && version < 3)) return null;
    const pathStart = at + ENTRY_FIXED + (extended ? 2 : 0);
    if (extended) {
      // Intent-to-add or skip-worktree entries: `git add -A` writes neither; leave them to git.
      if (b.readUInt16BE(at + 62) !== 0) return null;
    }
    const pathEnd = b.indexOf(0, pathStart);
    if (pathEnd === -1) return null;
    // The entry is NUL-padded to a multiple of 8 bytes (at least one NUL).
    const length = pathEnd - at + 1;
    at += Math.ceil(length / 8) * 8;
    const type = mode >>> 12;
    // Regular files (0o10), symlinks (0o12) and gitlinks (0o16); a sparse directory entry
    // (0o04) or anything else goes to git.
    if (type !== 0o10 && type !== 0o12 && type !== 0o16) return null;
    entries.push({ path: b.subarray(pathStart, pathEnd), mode, id, stat: statData, mtimeNs });
  }
  return entries;
}

const SLASH = 0x2f;

/** Git's tree entry order: names compared as bytes, a directory's as if it ended with `/`. */
function compareTreeNames(a: Buffer, aDir: boolean, b: Buffer, bDir: boolean): number {
  const n = Math.min(a.length, b.length);
  const c = a.subarray(0, n).compare(b.subarray(0, n));
  if (c !== 0) return c;
  const ac = a.length > n ? a[n]! : aDir ? SLASH : 0;
  const bc = b.length > n ? b[n]! : bDir ? SLASH : 0;
  return ac - bc;
}

interface TreeEntry {
  name: Buffer;
  mode: string;
  id: Buffer;
  dir: boolean;
}

/** Writes the tree of entries [from, to), all under `prefix` (which ends with `/` or is empty). */
function writeDirectory(
  gitDir: string,
  entries: TreeFile[],
  from: number,
  to: number,
  prefix: Buffer,
  store: ObjectStore,
): string {
  const skip = prefix.length;
  const items: TreeEntry[] = [];
  let i = from;
  while (i < to) {
    const entry = entries[i]!;
    const rest = entry.path.subarray(skip);
    const slash = rest.indexOf(SLASH);
    if (slash === -1) {
      items.push({ name: rest, mode: entry.mode.toString(8), id: entry.id, dir: false });
      i++;
      continue;
    }
    // A subdirectory: every following entry with the same `name/` prefix belongs to it.
    const name = rest.subarray(0, slash);
    const dirPrefix = Buffer.concat([prefix, name, Buffer.from("/")]);
    let j = i + 1;
    while (j < to && startsWith(entries[j]!.path, dirPrefix)) j++;
    const id = writeDirectory(gitDir, entries, i, j, dirPrefix, store);
    items.push({ name, mode: "40000", id: Buffer.from(id, "hex"), dir: true });
    i = j;
  }
  items.sort((a, b) => compareTreeNames(a.name, a.dir, b.name, b.dir));
  const body = Buffer.concat(
    items.flatMap((e) => [Buffer.from(`${e.mode} `), e.name, Buffer.from([0]), e.id]),
  );
  return writeLooseObject(gitDir, "tree", body, store);
}

function startsWith(path: Buffer, prefix: Buffer): boolean {
  return path.length > prefix.length && path.subarray(0, prefix.length).equals(prefix);
}
