import { mkdirSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { threadId } from "node:worker_threads";
import { isAlive } from "./processes";

let snapshotsDir: string | undefined;
const SNAPSHOTS_PARENT = join(tmpdir(), "looprun-test-snapshots");

/**
 * Workspace snapshots of this test process (and thread): one directory, removed at exit. A
 * process killed before its exit handler ran leaves its directory behind: the next one removes
 * the directories of processes that no longer run.
 */
export function testSnapshotsDir(): string {
  if (snapshotsDir === undefined) {
    mkdirSync(SNAPSHOTS_PARENT, { recursive: true });
    for (const name of readdirSync(SNAPSHOTS_PARENT)) {
      const pid = Number(name.split("-")[0]);
      if (Number.isInteger(pid) && pid > 0 && !isAlive(pid)) {
        rmSync(join(SNAPSHOTS_PARENT, name), { recursive: true, force: true });
      }
    }
    const dir = join(SNAPSHOTS_PARENT, `${process.pid}-${threadId}`);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir);
    snapshotsDir = dir;
    process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  }
  return snapshotsDir;
}
