import { randomBytes } from "node:crypto";
import { closeSync, open, readdirSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { madeByGoneProcess } from "../process/process-exists";

const openFile = promisify(open);

/**
 * Files and directories of an object store made ahead of need, while nothing waits for them:
 * writing a loose object (git-objects.ts) then neither creates its temporary file nor its
 * directory. Creating a file or a directory is most of what a loose object costs, and what it
 * costs varies: on this project's bench machine 0.03 ms at one moment, 0.5–1 ms at another
 * (bench/RESULTS.md, the thirty-seventh session). A snapshot is on the iteration's path; while
 * the command before it runs, the worker waits anyway — the files are made then (`refill`,
 * which the engine calls when that command starts), in libuv's thread pool.
 *
 * - Spare files: `count` empty files in the store, each held open; a write takes one, writes
 *   it and renames it into place. Each is named after the process that made it
 *   (`tmp_spare_<pid>_<random>`): those of a process that died (kill -9) are removed by the
 *   next one that keeps spares in the store, those of one that ends normally by `close`.
 * - The 256 directories (`00` … `ff`) a loose object goes into: git makes each before the
 *   first object in it, and in a new store nearly every object needs one.
 */
export const SPARE_PREFIX = "tmp_spare_";

interface SpareFile {
  path: string;
  /** Open for writing (close-on-exec, as libuv opens every file). */
  fd: number;
}

export class SpareFiles {
  private readonly ready: SpareFile[] = [];
  private making = 0;
  private closed = false;
  /** What is being made now: `close` waits for it. */
  private readonly work = new Set<Promise<void>>();

  /**
   * @param dir the object store (`objects/`): renames from it into `objects/xx/` stay on its
   *   filesystem.
   * @param count how many files are kept ready: a snapshot writes a blob per changed file, a
   *   tree per changed directory and the commit; beyond `count` the writes make their own.
   */
  constructor(
    readonly dir: string,
    private readonly count: number,
  ) {
    const names = removeDeadSpares(dir);
    this.track(this.makeFanOut(names));
    // The first ones at once: the store's first write (a session's baseline) made it.
    this.refill();
  }

  /**
   * Writes `data` into a spare file and renames it to `path`; false when none is ready or the
   * spare failed (its store removed since, say): it is dropped, and the caller makes its own
   * file. The next are made by `refill`, not here (see there).
   */
  writeAs(path: string, data: Buffer): boolean {
    const spare = this.ready.shift();
    if (spare === undefined) return false;
    try {
      try {
        for (let at = 0; at < data.length; ) at += writeSync(spare.fd, data, at);
      } finally {
        closeSync(spare.fd);
      }
      renameSync(spare.path, path);
      return true;
    } catch {
      removeFile(spare.path);
      return false;
    }
  }

  /**
   * Stops making anything, waits for what is being made, and removes the files ready (a worker
   * shutting down): the store holds nothing of this process's after.
   */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.work]);
    for (const { path, fd } of this.ready.splice(0)) {
      closeSync(fd);
      removeFile(path);
    }
  }

  /**
   * Makes files until `count` are ready or being made. Called while the worker waits on a
   * command (the engine: as an iteration's validation starts), not when a write takes a
   * file: making a file holds its directory in the kernel for as long as the create takes
   * (0.1–1 ms on the bench machine), and the renames out of it that followed at once waited for
   * it (0.2–0.6 ms an object); made on the event loop's next turn instead, they were made while
   * the next agent ran, and slowed it as much (bench/RESULTS.md, the thirty-eighth session).
   */
  refill(): void {
    while (!this.closed && this.ready.length + this.making < this.count) {
      this.making++;
      this.track(this.makeOne());
    }
  }

  private async makeOne(): Promise<void> {
    const path = join(this.dir, `${SPARE_PREFIX}${process.pid}_${randomBytes(6).toString("hex")}`);
    try {
      // Read-only, as git makes its objects: the descriptor writes all the same.
      const fd = await openFile(path, "wx", 0o444);
      this.ready.push({ path, fd });
    } catch {
      // Not made (a full disk, a store removed): writes make their own files meanwhile, and the
      // next refill tries again.
    } finally {
      this.making--;
    }
  }

  /** Makes the object directories `names` (what `dir` holds) lacks, one after the other. */
  private async makeFanOut(names: Set<string>): Promise<void> {
    if (names.size === 0) return;
    for (let i = 0; i < 256 && !this.closed; i++) {
      const name = i.toString(16).padStart(2, "0");
      if (names.has(name)) continue;
      try {
        await mkdir(join(this.dir, name));
      } catch (error) {
        // Made meanwhile (by a write, another worker): on to the next. Anything else: the
        // writes make their own.
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") return;
      }
    }
  }

  private track(job: Promise<void>): void {
    this.work.add(job);
    void job.finally(() => this.work.delete(job));
  }
}

function removeFile(path: string): void {
  try {
    unlinkSync(path);
  } catch {}
}

/**
 * Removes the spare files in `dir` of processes that are gone (killed before their `close`);
 * returns the names in `dir` (none when it cannot be read).
 */
export function removeDeadSpares(dir: string): Set<string> {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return new Set();
  }
  // This process's own (another store's here) and a live one's are in use.
  for (const name of names) if (madeByGoneProcess(name, SPARE_PREFIX)) removeFile(join(dir, name));
  return new Set(names);
}
