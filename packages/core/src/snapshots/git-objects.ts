import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { deflateSync, inflateSync } from "node:zlib";
import { rewriteInPlace } from "../util/rewrite-in-place";
import type { SpareFiles } from "./spare-files";

/**
 * The two git writes of a snapshot that need no git process: its commit object and the ref
 * that keeps it reachable. Each `git` spawned from a worker costs a few milliseconds of
 * blocked event loop (fork + exec + git's start-up), more than the write itself; a snapshot
 * is taken after every iteration, so these two spawns were a fair share of an iteration with
 * quick commands. The formats are git's documented on-disk ones (gitformat-loose, the
 * "files" ref backend), written the way git writes them: a temporary file renamed into place —
 * one made ahead when the store keeps spare files (spare-files.ts).
 *
 * The writes are synchronous, as git's own are: a snapshot's few small files (a blob or two, a
 * tree per changed directory, the commit, the ref) cost five file operations each, and through
 * the thread pool every one is a round trip of the event loop: 1.8–4.6 ms per snapshot of one
 * changed file, against 0.65–2.4 ms synchronously (bench/RESULTS.md; the spread is the disk).
 * The workspace scan that comes before them reads synchronously too.
 *
 * What the disk does is counted too: an object's directory is looked for, and made, before
 * its first write rather than after the write failed, and a ref that exists is rewritten in
 * place (see writeRef and rewriteInPlace).
 */

const SHA1_HEX = /^[0-9a-f]{40}$/;

/** Whether `id` is a SHA-1 object id (the snapshot git dirs are SHA-1 repositories). */
export function isSha1(id: string): boolean {
  return SHA1_HEX.test(id);
}

/** What a writer knows of a git dir's object store. */
export interface ObjectStore {
  /** Ids known to be stored (objects are never deleted here: gc is off): not looked for again. */
  known: Set<string>;
  /** Files made ahead for the next objects (spare-files.ts). */
  spares?: SpareFiles;
}

/** Writes a loose object (unless it exists) and returns its id. */
export function writeLooseObject(
  gitDir: string,
  type: "commit" | "tree" | "blob",
  content: Buffer,
  store?: ObjectStore,
): string {
  const raw = Buffer.concat([Buffer.from(`${type} ${content.length}\0`), content]);
  const id = createHash("sha1").update(raw).digest("hex");
  if (store?.known.has(id)) return id;
  const dir = join(gitDir, "objects", id.slice(0, 2));
  const file = join(dir, id.slice(2));
  // In a directory made just now there is nothing to look for.
  if (ensureDir(dir) || !existsSync(file)) {
    const data = deflateSync(raw);
    if (!store?.spares?.writeAs(file, data)) {
      const tmp = join(dir, `tmp_obj_${process.pid}_${randomBytes(6).toString("hex")}`);
      writeInDir(tmp, data, 0o444);
      renameSync(tmp, file);
    }
  }
  store?.known.add(id);
  return id;
}

/** Object directories (`objects/xx`) known to exist: each is made at most once here. */
const madeDirs = new Set<string>();

/**
 * Makes `dir` unless it is known to exist; returns whether this call made it. Looked for first:
 * in the object store the sessions share (snapshot-repository.ts) most directories exist, and a
 * `mkdir` that fails costs more than a look.
 */
function ensureDir(dir: string): boolean {
  if (madeDirs.has(dir)) return false;
  const made = !existsSync(dir) && mkdirSync(dir, { recursive: true }) !== undefined;
  // A bound on what a long-lived worker remembers: forgetting costs one mkdir.
  if (madeDirs.size >= 100_000) madeDirs.clear();
  madeDirs.add(dir);
  return made;
}

export interface CommitFields {
  tree: string;
  parent: string | null;
  /** One line; stored with git's trailing newline. */
  message: string;
  /** @defaultValue now — seconds since the epoch */
  timeSeconds?: number;
}

/** The identity every snapshot carries (as `gitEnv` gives the git commands). */
const IDENTITY = "looprun <looprun@localhost>";

/** Writes a commit object as `git commit-tree TREE [-p PARENT] -m MESSAGE` would. */
export function writeCommit(gitDir: string, fields: CommitFields, store?: ObjectStore): string {
  if (!isSha1(fields.tree) || (fields.parent !== null && !isSha1(fields.parent)))
    throw new Error(`not SHA-1 object ids: ${fields.tree} ${fields.parent ?? ""}`);
  const when = `${fields.timeSeconds ?? Math.floor(Date.now() / 1000)} +0000`;
  const lines = [
    `tree ${fields.tree}`,
    ...(fields.parent ? [`parent ${fields.parent}`] : []),
    `author ${IDENTITY} ${when}`,
    `committer ${IDENTITY} ${when}`,
    "",
    fields.message.replaceAll("\n", " "),
  ];
  return writeLooseObject(gitDir, "commit", Buffer.from(`${lines.join("\n")}\n`, "utf8"), store);
}

/**
 * The tree, first parent (null for a root commit) and message of a commit stored as a loose
 * object, or null (not loose, or not a commit).
 */
export async function readCommitHeader(
  gitDir: string,
  id: string,
): Promise<{ tree: string; parent: string | null; message: string } | null> {
  if (!isSha1(id)) return null;
  let raw: Buffer;
  try {
    raw = inflateSync(await readFile(join(gitDir, "objects", id.slice(0, 2), id.slice(2))));
  } catch {
    return null;
  }
  const body = raw.indexOf(0);
  if (body === -1 || !raw.subarray(0, body).toString("latin1").startsWith("commit ")) return null;
  const match = /^tree ([0-9a-f]{40})\n(?:parent ([0-9a-f]{40})\n)?/.exec(
    raw.toString("latin1", body + 1, body + 1 + 96),
  );
  if (!match?.[1]) return null;
  const blank = raw.indexOf("\n\n", body + 1);
  const message = blank === -1 ? "" : raw.toString("utf8", blank + 2).trimEnd();
  return { tree: match[1], parent: match[2] ?? null, message };
}

const REF_NAME = /^refs\/[A-Za-z0-9_/-]+$/;

/**
 * Points a loose ref at `id` (`git update-ref REF ID` without a reflog, as in a bare
 * repository). A new ref is written as git writes one, a lock file renamed into place; one that
 * exists is rewritten in place: a ref is always an id and a newline, 41 bytes in one write, and
 * only the run's own worker writes its refs (one active run per session, its writes fenced).
 */
export function writeRef(gitDir: string, ref: string, id: string): void {
  if (!REF_NAME.test(ref) || ref.includes("//") || ref.endsWith("/"))
    throw new Error(`not a ref name looprun writes: ${ref}`);
  if (!isSha1(id)) throw new Error(`not a SHA-1 object id: ${id}`);
  const file = join(gitDir, ref);
  const content = Buffer.from(`${id}\n`);
  if (rewriteInPlace(file, content)) return;
  const lock = `${file}.lock`;
  writeInDir(lock, content);
  renameSync(lock, file);
}

/** Writes a file, making its directory first only when it is missing (most writes find it). */
function writeInDir(path: string, content: string | Buffer, mode?: number): void {
  const opts = mode === undefined ? {} : { mode };
  try {
    writeFileSync(path, content, opts);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, content, opts);
  }
}
