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
import { CollectionHeld, holdCollection, liveWriters, type StoreWriter } from "./store-writers";

/**
 * `looprun gc`: removes from a snapshot store (`LOOPRUN_SNAPSHOTS_DIR`) what no run of the
 * database needs any more — the refs of runs that are gone (retention deleted them, and the
 * worker that was to delete their refs died) and the objects nothing kept reaches. The
 * sessions' git dirs share one object store (snapshot-repository.ts), so no git dir may prune
 * on its own; this reads every one of them and prunes the store once, from a git dir of its
 * own whose refs are everything that is kept:
 *
 * - the refs of runs the database has (`refs/looprun/<runId>`, `refs/looprun/rollback/<runId>`)
 *   and any other ref of a git dir;
 * - every snapshot the database names (a run's baseline and latest, each iteration attempt's);
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
  runIds: readonly string[];
  /** Every snapshot (commit id) it names for them. */
  snapshotIds: readonly string[];
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

export async function collectSnapshotGarbage(opts: SnapshotGcOptions): Promise<SnapshotGcResult> {
  const root = resolve(opts.root);
  const env = gitEnv(opts.path, root);
  const timeoutMs = opts.timeoutMs ?? 10 * 60_000;
  const git = async (gitDir: string, args: string[], more: GitCall = {}): Promise<GitResult> => {
    const result = await runGit([`--git-dir=${gitDir}`, ...args], {
      env: { ...env, ...more.env },
      timeoutMs,
      maxStdoutBytes: 1 << 30,
      ...(more.stdin !== undefined ? { stdin: more.stdin } : {}),
    });
    if (result.exitCode !== 0) throw new GitError(args, result);
    return result;
  };
  const result: SnapshotGcResult = {
    sessions: 0,
    ownObjects: [],
    refsOfGoneRuns: 0,
    objectsRemoved: 0,
    bytesRemoved: 0,
    objectsKept: 0,
  };
  const objects = sharedObjectsDir(root);
  if (!existsSync(objects)) return result;
  const startedAt = Date.now();
  let unlock: () => void;
  try {
    unlock = holdCollection(root);
  } catch (error) {
    if (error instanceof CollectionHeld) throw new SnapshotGcRefused(error.message);
    throw error;
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
    const sessions = readdirSync(root)
      .filter((name) => SESSION_GIT_DIR.test(name) && existsSync(join(root, name, "HEAD")))
      .sort();
    makeGitDir(own, objects);
    const indexCopy = join(own, "index");
    const keep = new Set<string>();
    const gone: { gitDir: string; refs: string[] }[] = [];
    const goneRuns = new Set<string>();
    let runRefs = 0;
    let newestKnown = "";
    for (const [i, name] of sessions.entries()) {
      const gitDir = join(root, name);
      if (!lstatSync(join(gitDir, "objects")).isSymbolicLink()) {
        result.ownObjects.push(gitDir);
        continue;
      }
      result.sessions++;
      const refs = await git(gitDir, ["for-each-ref", "--format=%(objectname) %(refname)"]);
      const lines = refs.stdout
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => line.split(" ") as [string, string]);
      const runIds = [...new Set(lines.flatMap(([, ref]) => RUN_REF.exec(ref)?.[1] ?? []))];
      const known = new Set<string>();
      for (let at = 0; at < runIds.length; at += RECORDS_BATCH) {
        const records = await opts.records(runIds.slice(at, at + RECORDS_BATCH));
        for (const id of records.runIds) known.add(id);
        for (const id of records.snapshotIds) keep.add(id);
      }
      const goneRefs: string[] = [];
      for (const [id, ref] of lines) {
        const run = RUN_REF.exec(ref)?.[1];
        if (run !== undefined) {
          runRefs++;
          if (!known.has(run)) {
            goneRefs.push(ref);
            goneRuns.add(run);
            continue;
          }
          if (run > newestKnown) newestKnown = run;
        }
        keep.add(id);
      }
      if (goneRefs.length > 0) gone.push({ gitDir, refs: goneRefs });
      for (const index of indexesOf(gitDir)) {
        // From a copy: write-tree may write its cache of trees back into the index it reads.
        copyFileSync(index, indexCopy);
        const tree = await git(gitDir, ["write-tree", "--missing-ok"], {
          env: { GIT_INDEX_FILE: indexCopy },
        });
        keep.add(tree.stdout.trim());
      }
      opts.onProgress?.(i + 1, sessions.length);
    }
    if (opts.force !== true) refuseAnotherDatabase(root, runRefs, newestKnown, goneRuns);
    // Refs to objects that are not there would stop the walk: kept ids are those git has.
    const ids = [...keep].filter((id) => /^[0-9a-f]{40}$/.test(id));
    const check = await git(own, ["cat-file", "--batch-check"], { stdin: `${ids.join("\n")}\n` });
    const present = check.stdout
      .split("\n")
      .filter((line) => line !== "" && !line.endsWith(" missing"))
      .map((line) => line.slice(0, 40));
    writePackedRefs(own, present);
    result.refsOfGoneRuns = gone.reduce((n, g) => n + g.refs.length, 0);
    if (opts.dryRun !== true) {
      // What processes that are gone left: spare git dirs and files, a collector's git dir.
      removeDeadSpares(root);
      removeDeadSpareFiles(objects);
      for (const name of readdirSync(root)) {
        if (madeByGoneProcess(name, GC_PREFIX))
          rmSync(join(root, name), { recursive: true, force: true });
      }
      for (const { gitDir, refs } of gone) {
        await git(gitDir, ["update-ref", "--stdin"], {
          stdin: refs.map((ref) => `delete ${ref}\n`).join(""),
        });
      }
    }
    // git lists what nothing kept reaches; this process removes it — a git prune would go on
    // removing after a collector killed meanwhile, while writers no longer wait for it.
    const listed = await git(own, ["prune", "--dry-run", "--expire=now"]);
    for (const line of listed.stdout.split("\n")) {
      const id = line.split(" ")[0] ?? "";
      if (!/^[0-9a-f]{40}$/.test(id)) continue;
      const file = join(objects, id.slice(0, 2), id.slice(2));
      let stat: Stats;
      try {
        stat = statSync(file);
      } catch {
        continue; // packed, or gone meanwhile
      }
      // Written since the collection began: not this collection's to judge.
      if (stat.mtimeMs >= startedAt) continue;
      if (opts.dryRun !== true) rmSync(file, { force: true });
      result.objectsRemoved++;
      result.bytesRemoved += stat.blocks * 512;
    }
    const left = (await looseObjects(git, own)).count;
    result.objectsKept = opts.dryRun === true ? left - result.objectsRemoved : left;
    return result;
  } finally {
    rmSync(own, { recursive: true, force: true });
    unlock();
  }
}

interface GitCall {
  env?: Record<string, string>;
  stdin?: string;
}

/** The index files of a session's git dir: one per workspace, and the single one of old. */
function indexesOf(gitDir: string): string[] {
  const found: string[] = [];
  if (existsSync(join(gitDir, "index"))) found.push(join(gitDir, "index"));
  try {
    for (const name of readdirSync(join(gitDir, "indexes"))) {
      if (/^[0-9a-f]{40}$/.test(name)) found.push(join(gitDir, "indexes", name));
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

async function looseObjects(
  git: (gitDir: string, args: string[]) => Promise<GitResult>,
  gitDir: string,
): Promise<{ count: number; bytes: number }> {
  const out = (await git(gitDir, ["count-objects", "-v"])).stdout;
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, "m").exec(out)?.[1] ?? 0);
  return { count: field("count"), bytes: field("size") * 1024 };
}

/**
 * Refuses a collection against what looks like another database than the workers' — it would
 * take every snapshot for garbage: refs name runs and it has none of them, or it has runs but
 * not the newest ones the refs name (an older copy: retention deletes the oldest runs first).
 */
function refuseAnotherDatabase(
  root: string,
  runRefs: number,
  newestKnown: string,
  goneRuns: ReadonlySet<string>,
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
