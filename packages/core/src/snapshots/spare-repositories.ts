import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, renameSync, rmSync } from "node:fs";
import { mkdir, rm, symlink, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { madeByGoneProcess } from "../process/process-exists";
import { CONFIG, HEAD, SNAPSHOT_ATTRIBUTES, sharedObjectsDir } from "./snapshot-repository";

/**
 * A session's snapshot git dir made ahead of need, as the spare files are (spare-files.ts): a
 * new session's first snapshot renames it into place instead of making its seven files and
 * directories then — on the run's path, before its first iteration, at 0.03–1 ms each on this
 * project's bench machine. It is what initSnapshotRepository makes, and `refs/looprun/` (where
 * the run's ref goes), made in libuv's thread pool.
 *
 * Named `.spare_<pid>_<random>.git` in the snapshots root: a session id cannot start with a
 * dot. Those of a process that died are removed by the next one that keeps spares there.
 */
const SPARE_PREFIX = ".spare_";

export class SpareRepositories {
  private ready: string | null = null;
  private closed = false;
  private making: Promise<void> | null = null;

  constructor(readonly root: string) {
    removeDeadSpares(root);
  }

  /**
   * Moves the git dir made ahead to `gitDir`; false when none is ready or `gitDir` is there
   * already (a maker that died half-way: the caller completes it). Starts making the next.
   */
  takeAs(gitDir: string): boolean {
    const spare = this.ready;
    this.ready = null;
    let taken = false;
    if (spare !== null) {
      try {
        renameSync(spare, gitDir);
        taken = true;
      } catch {
        // Kept for the next new session, unless it is gone (its root removed, say).
        if (existsSync(spare)) this.ready = spare;
      }
    }
    this.fill();
    return taken;
  }

  /** Stops making, waits for what is being made, and removes what is ready. */
  async close(): Promise<void> {
    this.closed = true;
    await this.making;
    if (this.ready !== null) rmSync(this.ready, { recursive: true, force: true });
    this.ready = null;
  }

  private fill(): void {
    if (this.closed || this.ready !== null || this.making !== null) return;
    this.making = this.makeOne().finally(() => {
      this.making = null;
    });
  }

  private async makeOne(): Promise<void> {
    const dir = join(
      this.root,
      `${SPARE_PREFIX}${process.pid}_${randomBytes(6).toString("hex")}.git`,
    );
    const objects = sharedObjectsDir(this.root);
    try {
      await mkdir(join(objects, "pack"), { recursive: true });
      await mkdir(join(objects, "info"), { recursive: true });
      await mkdir(join(dir, "refs", "looprun"), { recursive: true });
      await mkdir(join(dir, "info"));
      // Relative, as initSnapshotRepository links it: the same from `<session>.git`.
      await symlink(relative(dir, objects), join(dir, "objects"));
      await writeFile(join(dir, "config"), CONFIG);
      await writeFile(join(dir, "info", "attributes"), SNAPSHOT_ATTRIBUTES);
      await writeFile(join(dir, "HEAD"), HEAD);
    } catch {
      // Not made (a full disk, the root removed): new sessions make their own meanwhile.
      await rm(dir, { recursive: true, force: true }).catch(() => {});
      return;
    }
    if (this.closed) await rm(dir, { recursive: true, force: true }).catch(() => {});
    else this.ready = dir;
  }
}

/** Removes the git dirs made ahead in `root` by processes that are gone. */
export function removeDeadSpares(root: string): void {
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return;
  }
  for (const name of names) {
    if (madeByGoneProcess(name, SPARE_PREFIX))
      rmSync(join(root, name), { recursive: true, force: true });
  }
}
