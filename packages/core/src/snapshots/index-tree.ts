import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { writeLooseObject } from "./git-objects";

/**
 * `git write-tree` without the git process: reads the index that `git add -A` just wrote and
 * writes its tree objects (gitformat-index, version 2 or 3; gitformat-loose). Returns null
 * for anything it does not handle — another index version, unmerged or sparse entries — and
 * the caller runs `git write-tree` instead. Tree ids that exist are remembered per git dir,
 * so an unchanged directory costs neither a write nor a look at the disk.
 */
export async function writeTreeFromIndex(
  gitDir: string,
  known: Set<string>,
): Promise<string | null> {
  let index: Buffer;
  try {
    index = await readFile(join(gitDir, "index"));
  } catch {
    return null;
  }
  const entries = parseIndex(index);
  if (entries === null) return null;
  return writeDirectory(gitDir, entries, 0, entries.length, Buffer.alloc(0), known);
}

interface IndexEntry {
  /** Path bytes relative to the work tree, `/`-separated. */
  path: Buffer;
  mode: number;
  id: Buffer;
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
    entries.push({ path: b.subarray(pathStart, pathEnd), mode, id });
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
async function writeDirectory(
  gitDir: string,
  entries: IndexEntry[],
  from: number,
  to: number,
  prefix: Buffer,
  known: Set<string>,
): Promise<string> {
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
    const id = await writeDirectory(gitDir, entries, i, j, dirPrefix, known);
    items.push({ name, mode: "40000", id: Buffer.from(id, "hex"), dir: true });
    i = j;
  }
  items.sort((a, b) => compareTreeNames(a.name, a.dir, b.name, b.dir));
  const body = Buffer.concat(
    items.flatMap((e) => [Buffer.from(`${e.mode} `), e.name, Buffer.from([0]), e.id]),
  );
  return writeLooseObject(gitDir, "tree", body, known);
}

function startsWith(path: Buffer, prefix: Buffer): boolean {
  return path.length > prefix.length && path.subarray(0, prefix.length).equals(prefix);
}
