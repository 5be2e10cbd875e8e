import {
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  rmSync,
  type Stats,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join, relative, resolve } from "node:path";
import { madeByGoneProcess } from "../process/process-exists";
import { GitError, type GitResult, gitEnv, runGit } from "./git";
import { HEAD, sharedObjectsDir } from "./snapshot-repository";
import { removeDeadSpares as removeDeadSpareFiles } from "./spare-files";
import { removeDeadSpares } from "./spare-repositories";
import {
  collectorOf,
  GC_LOCK,
  holdCollection,
  liveWriters,
  type StoreWriter,
} from "./store-writers";

/**
 * `looprun gc`: removes from a snapshot store (`LOOPRUN_SNAPSHOTS_DIR`) what no run of the
 * database needs any more — the refs of runs that are gone (retention deleted them, and the
 * worker that was to delete their refs died) and the objects nothing kept reaches. The
 * sessions' git dirs share one object store (snapshot-repository.ts), so no git dir may prune
 * on its own; this reads every one of them, then lists (`git prune --dry-run`, from a git dir of
 * its own whose refs are everything that is kept) and removes what is not kept:
 *
 * - the refs of runs the database has (`refs/looprun/<runId>`, `refs/looprun/rollback/<runId>`)
 *   and any other ref of a git dir;
 * - every snapshot the database names (a run's baseline and latest, each iteration attempt's);
 * - what was written since the collection began;
 * - what each workspace's index names (`indexes/*`, an old `index`): a later `git add -A` does
 *   not hash a file again whose stat data the index has, and writes a tree naming its blob.
 *
 * Writers remember objects too (store-writers.ts): it is refused while one may run. Objects in
 * packs are left alone (looprun writes loose objects only), and so are git dirs with objects of
 * their own (made by an older looprun).
 */

/** What the database has of some runs (see SnapshotGcOptions.records). */
export interface RunRecords {
  /** Those of the runs asked for that it has. */
  runIds: string[];
  /** Every snapshot (commit id) it names for them. */
  snapshotIds: string[];
}

export interface SnapshotGcOptions {
  /** The snapshot store: LOOPRUN_SNAPSHOTS_DIR. */
  root: string;
  /**
   * What the database has of the runs a git dir's refs name (up to 500 at a time): runs are
   * asked for by id, not by session — on a case-insensitive filesystem two sessions whose ids
   * differ in case share a git dir.
   */
  records(runIds: readonly string[]): Promise<RunRecords> | RunRecords;
  /** Count what would go; remove nothing. */
  dryRun?: boolean;
  /**
   * Go on although writers may run (their files are on another host, or left by a host that is
   * gone), or although the database looks like another one (see collectSnapshotGarbage).
   */
  force?: boolean;
  /** PATH to find git on. @defaultValue /usr/local/bin:/usr/bin:/bin */
  path?: string;
  /** @defaultValue 10 minutes — per git command (a prune walks every object kept) */
  timeoutMs?: number;
  /** After each git dir read: how many of how many. */
  onProgress?: (done: number, total: number) => void;
}

export interface SnapshotGcResult {
  /** Git dirs read (sharing the store). */
  sessions: number;
  /** Git dirs with objects of their own, left as they are. */
  ownObjects: string[];
  /** Refs of runs the database does not have: deleted (or, dry, to delete). */
  refsOfGoneRuns: number;
  /** Loose objects removed (or, dry, to remove), and their bytes on disk. */
  objectsRemoved: number;
  bytesRemoved: number;
  /** Loose objects left. */
  objectsKept: number;
}

/** Refused: what it would remove may still be needed. Nothing was changed. */
export class SnapshotGcRefused extends Error {
  override readonly name = "SnapshotGcRefused";
  constructor(
    message: string,
    readonly writers: StoreWriter[] = [],
  ) {
    super(message);
  }
}

const SESSION_GIT_DIR = /^([A-Za-z0-9_-]{1,64})\.git$/;
const RUN_REF = /^refs\/looprun\/(?:rollback\/)?([0-9A-Z]{26})$/;
const GC_PREFIX = ".gc_";
/** Run ids asked of the database at a time. */
const RECORDS_BATCH = 500;

/** Runs git on a git dir of the store; throws a GitError unless it succeeds. */
type Git = (gitDir: string, args: string[], more?: GitCall) => Promise<GitResult>;

interface GitCall {
  env?: Record<string, string>;
  stdin?: string;
}

/** What reading the store's git dirs found (see readStore). */
interface StoreReading {
  /** Object ids to keep, as named (some may not be in the store). */
  keep: Set<string>;
  /** Per git dir, the refs of runs the database does not have. */
  gone: { gitDir: string; refs: string[] }[];
  /** The runs those refs name. */
  goneRuns: Set<string>;
  /** Refs of runs, and the newest run the database has of them ("" when none). */
  runRefs: number;
  newestKnown: string;
  sessions: number;
  ownObjects: string[];
}

export async function collectSnapshotGarbage(opts: SnapshotGcOptions): Promise<SnapshotGcResult> {
  const root = resolve(opts.root);
  const env = gitEnv(opts.path, root);
  const timeoutMs = opts.timeoutMs ?? 10 * 60_000;
  const git: Git = async (gitDir, args, more = {}) => {
    const result = await runGit([`--git-dir=${gitDir}`, ...args], {
      env: { ...env, ...more.env },
      timeoutMs,
      maxStdoutBytes: 1 << 30,
      ...(more.stdin !== undefined ? { stdin: more.stdin } : {}),
    });
    if (result.exitCode !== 0) throw new GitError(args, result);
    return result;
  };
  const objects = sharedObjectsDir(root);
  if (!existsSync(objects)) {
    return {
      sessions: 0,
      ownObjects: [],
      refsOfGoneRuns: 0,
      objectsRemoved: 0,
      bytesRemoved: 0,
      objectsKept: 0,
    };
  }
  const startedAt = Date.now();
  const unlock = holdCollection(root);
  if (unlock === null) {
    const holder = collectorOf(root);
    throw new SnapshotGcRefused(
      `another looprun gc${holder === null ? "" : ` (pid ${holder.pid} on ${holder.host})`} is collecting this store: ${join(root, GC_LOCK)} (remove it if that collector is gone)`,
    );
  }
  const own = join(root, `${GC_PREFIX}${process.pid}_.git`);
  try {
    const writers = liveWriters(root);
    if (writers.length > 0 && opts.force !== true) {
      const list = writers.map((w) => `pid ${w.pid} on ${w.host} (${w.command})`).join("; ");
      throw new SnapshotGcRefused(
        `${writers.length === 1 ? "a process" : `${writers.length} processes`} may write into ${root}: ${list}. Stop the API and the workers first (or, for a writer that is gone from another host, remove its file in ${join(root, ".writers")})`,
        writers,
      );
    }
    makeGitDir(own, objects);
    const reading = await readStore(root, opts, git, join(own, "index"));
    if (opts.force !== true) refuseAnotherDatabase(root, reading);
    // Refs to objects that are not there would stop the walk: kept ids are those git has.
    const ids = [...reading.keep].filter((id) => SHA1.test(id));
    const check = await git(own, ["cat-file", "--batch-check"], { stdin: `${ids.join("\n")}\n` });
    const present = check.stdout
      .split("\n")
      .filter((line) => line !== "" && !line.endsWith(" missing"))
      .map((line) => line.slice(0, 40));
    writePackedRefs(own, present);
    if (opts.dryRun !== true) {
      // What processes that are gone left: spare git dirs and files, a collector's git dir.
      removeDeadSpares(root);
      removeDeadSpareFiles(objects);
      for (const name of readdirSync(root)) {
        if (madeByGoneProcess(name, GC_PREFIX))
          rmSync(join(root, name), { recursive: true, force: true });
      }
      for (const { gitDir, refs } of reading.gone) {
        await git(gitDir, ["update-ref", "--stdin"], {
          stdin: refs.map((ref) => `delete ${ref}\n`).join(""),
        });
      }
    }
    const removed = await removeUnkept(git, own, objects, startedAt, opts.dryRun === true);
    const left = await looseObjects(git, own);
    return {
      sessions: reading.sessions,
      ownObjects: reading.ownObjects,
      refsOfGoneRuns: reading.gone.reduce((n, g) => n + g.refs.length, 0),
      objectsRemoved: removed.objects,
      bytesRemoved: removed.bytes,
      objectsKept: opts.dryRun === true ? left - removed.objects : left,
    };
  } finally {
    rmSync(own, { recursive: true, force: true });
    unlock();
  }
}

const SHA1 = /^[0-9a-f]{40}$/;

/**
 * Reads every session's git dir: its refs (those of runs the database has are kept, the others
 * go), the snapshots the database names of its runs, and the trees its indexes name (written
 * from a copy of each index, `indexCopy`: write-tree may write its cache of trees back into the
 * index it reads).
 */
async function readStore(
  root: string,
  opts: SnapshotGcOptions,
  git: Git,
  indexCopy: string,
): Promise<StoreReading> {
  const reading: StoreReading = {
    keep: new Set(),
    gone: [],
    goneRuns: new Set(),
    runRefs: 0,
    newestKnown: "",
    sessions: 0,
    ownObjects: [],
  };
  const names = readdirSync(root)
    .filter((name) => SESSION_GIT_DIR.test(name) && existsSync(join(root, name, "HEAD")))
    .sort();
  for (const [i, name] of names.entries()) {
    const gitDir = join(root, name);
    if (!lstatSync(join(gitDir, "objects")).isSymbolicLink()) {
      reading.ownObjects.push(gitDir);
      continue;
    }
    reading.sessions++;
    const refs = (await git(gitDir, ["for-each-ref", "--format=%(objectname) %(refname)"])).stdout
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => {
        const [id = "", ref = ""] = line.split(" ");
        return { id, ref, run: RUN_REF.exec(ref)?.[1] };
      });
    const runIds = [...new Set(refs.flatMap((r) => r.run ?? []))];
    const known = new Set<string>();
    for (let at = 0; at < runIds.length; at += RECORDS_BATCH) {
      const records = await opts.records(runIds.slice(at, at + RECORDS_BATCH));
      for (const id of records.runIds) known.add(id);
      for (const id of records.snapshotIds) reading.keep.add(id);
    }
    const goneRefs: string[] = [];
    for (const { id, ref, run } of refs) {
      if (run !== undefined) {
        reading.runRefs++;
        if (!known.has(run)) {
          goneRefs.push(ref);
          reading.goneRuns.add(run);
          continue;
        }
        if (run > reading.newestKnown) reading.newestKnown = run;
      }
      reading.keep.add(id);
    }
    if (goneRefs.length > 0) reading.gone.push({ gitDir, refs: goneRefs });
    for (const index of indexesOf(gitDir)) {
      copyFileSync(index, indexCopy);
      const tree = await git(gitDir, ["write-tree", "--missing-ok"], {
        env: { GIT_INDEX_FILE: indexCopy },
      });
      reading.keep.add(tree.stdout.trim());
    }
    opts.onProgress?.(i + 1, names.length);
  }
  return reading;
}

/**
 * Removes the loose objects the refs of `own` do not reach (none on a dry run: only counted),
 * but those written since the collection began. git lists them; this process removes them — a
 * `git prune` would go on removing after a collector killed meanwhile, while writers no longer
 * wait for it.
 */
async function removeUnkept(
  git: Git,
  own: string,
  objects: string,
  startedAt: number,
  dryRun: boolean,
): Promise<{ objects: number; bytes: number }> {
  const removed = { objects: 0, bytes: 0 };
  const listed = await git(own, ["prune", "--dry-run", "--expire=now"]);
  for (const line of listed.stdout.split("\n")) {
    const id = line.split(" ")[0] ?? "";
    if (!SHA1.test(id)) continue;
    const file = join(objects, id.slice(0, 2), id.slice(2));
    let stat: Stats;
    try {
      stat = statSync(file);
    } catch {
      continue; // packed, or gone meanwhile
    }
    if (stat.mtimeMs >= startedAt) continue;
    if (!dryRun) rmSync(file, { force: true });
    removed.objects++;
    removed.bytes += stat.blocks * 512;
  }
  return removed;
}

/** The index files of a session's git dir: one per workspace, and the single one of old. */
function indexesOf(gitDir: string): string[] {
  const found: string[] = [];
  if (existsSync(join(gitDir, "index"))) found.push(join(gitDir, "index"));
  try {
    for (const name of readdirSync(join(gitDir, "indexes"))) {
      if (SHA1.test(name)) found.push(join(gitDir, "indexes", name));
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  return found;
}

/** A git dir on the shared store that may prune it (no `preciousObjects`), and has no refs yet. */
function makeGitDir(gitDir: string, objects: string): void {
  mkdirSync(join(gitDir, "refs"), { recursive: true });
  symlinkSync(relative(gitDir, objects), join(gitDir, "objects"));
  writeFileSync(join(gitDir, "config"), "[core]\n\trepositoryformatversion = 0\n\tbare = true\n");
  writeFileSync(join(gitDir, "HEAD"), HEAD);
}

/** One ref per kept object, as a packed-refs file: millions of loose refs would be as many files. */
function writePackedRefs(gitDir: string, ids: readonly string[]): void {
  const width = String(ids.length).length;
  const lines = ids.map((id, i) => `${id} refs/keep/${String(i).padStart(width, "0")}\n`);
  writeFileSync(join(gitDir, "packed-refs"), `# pack-refs with: peeled sorted \n${lines.join("")}`);
}

/** How many loose objects the store holds. */
async function looseObjects(git: Git, gitDir: string): Promise<number> {
  const out = (await git(gitDir, ["count-objects", "-v"])).stdout;
  return Number(/^count: (\d+)$/m.exec(out)?.[1] ?? 0);
}

/**
 * Refuses a collection against what looks like another database than the workers' — it would
 * take every snapshot for garbage: refs name runs and it has none of them, or it has runs but
 * not the newest ones the refs name (an older copy: retention deletes the oldest runs first).
 */
function refuseAnotherDatabase(
  root: string,
  { runRefs, newestKnown, goneRuns }: StoreReading,
): void {
  if (runRefs > 0 && newestKnown === "") {
    throw new SnapshotGcRefused(
      `none of the runs the ${runRefs} refs of ${root} name is in the database: is it the database the workers use? (--force if retention deleted them all)`,
    );
  }
  const newer = [...goneRuns].filter((id) => id > newestKnown);
  if (newer.length > 0) {
    throw new SnapshotGcRefused(
      `${newer.length} of the runs the refs of ${root} name are newer than any the database has (${newer.sort().at(-1)}): is it an older copy of the workers' database? (--force to delete their refs and snapshots all the same)`,
    );
  }
}
