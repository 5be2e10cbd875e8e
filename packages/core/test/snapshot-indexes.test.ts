import {
  existsSync,
  mkdirSync,
  readdirSync,
  renameSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { restoreWorkspace, WorkspaceSnapshots } from "@looprun/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { dropSnapshots, snapshotsIn } from "./support";

// Each workspace has its own index in the session's snapshot git dir (workspace-index.ts):
// a snapshot of one workspace never rewrites the index a restore of another is using.

let dir: string;
let a: string;
let b: string;
let snapshots: WorkspaceSnapshots;
const targetA = () => ({ sessionId: "s1", runId: "run-a", workspace: a });
const targetB = () => ({ sessionId: "s1", runId: "run-b", workspace: b });

beforeEach(async () => {
  ({ dir, snapshots } = await snapshotsIn("looprun-indexes-"));
  a = join(dir, "a");
  b = join(dir, "b");
  mkdirSync(a);
  mkdirSync(b);
  for (const n of [1, 2, 3]) writeFileSync(join(a, `base${n}.txt`), `base${n}\n`);
  for (let n = 1; n <= 50; n++) writeFileSync(join(b, `other${n}.txt`), `o${n}\n`);
});
afterEach(() => dropSnapshots({ dir, snapshots }));

describe("a workspace's own index", () => {
  it("restores one workspace while another of the session is snapshotted mid-restore", async () => {
    const baseline = await snapshots.take(targetA(), "baseline", null);
    for (let n = 1; n <= 20; n++) writeFileSync(join(a, `gen${n}.bin`), `gen${n}\n`);
    // The run of workspace b takes its baseline between the restore's `add -A` and its
    // `read-tree` (the audit's race-session.sh, made deterministic).
    const racing = Object.create(snapshots) as WorkspaceSnapshots;
    racing.gitIn = async (...args) => {
      if (args[2][0] === "diff") await snapshots.take(targetB(), "baseline", null);
      return snapshots.gitIn(...args);
    };

    const restored = await restoreWorkspace(racing, targetA(), baseline);
    expect(readdirSync(a).sort()).toEqual(["base1.txt", "base2.txt", "base3.txt"]);
    expect(restored.files).toHaveLength(20);
    expect(restored.files.every((f) => f.change === "removed" && f.path.startsWith("gen"))).toBe(
      true,
    );
    expect(readdirSync(b)).toHaveLength(50);
  });

  it("keeps working in a git dir made with one index for the session", async () => {
    const baseline = await snapshots.take(targetA(), "baseline", null, undefined, undefined, {
      index: true,
    });
    // The layout before indexes were per workspace: `<git dir>/index` alone.
    const gitDir = snapshots.gitDir("s1");
    renameSync(snapshots.indexFile("s1", a), join(gitDir, "index"));
    rmSync(join(gitDir, "indexes"), { recursive: true });
    writeFileSync(join(a, "new.txt"), "new\n");

    const fresh = new WorkspaceSnapshots({ root: join(dir, "snapshots") });
    const restored = await restoreWorkspace(fresh, targetA(), baseline);
    fresh.close();
    expect(restored.files).toEqual([{ path: "new.txt", change: "removed" }]);
    expect(readdirSync(a).sort()).toEqual(["base1.txt", "base2.txt", "base3.txt"]);
  });

  it("removes a lock left on a workspace's index once its writer must be gone", async () => {
    const baseline = await snapshots.take(targetA(), "baseline", null);
    writeFileSync(join(a, "new.txt"), "new\n");
    // A worker killed mid-`add -A` leaves the lock; every git here is killed within timeoutMs.
    const lock = `${snapshots.indexFile("s1", a)}.lock`;
    mkdirSync(join(snapshots.gitDir("s1"), "indexes"), { recursive: true });
    writeFileSync(lock, "");
    const old = new Date(Date.now() - 120_000);
    utimesSync(lock, old, old);

    const restored = await restoreWorkspace(snapshots, targetA(), baseline);
    expect(restored.files).toEqual([{ path: "new.txt", change: "removed" }]);
    expect(existsSync(lock)).toBe(false);
    expect(existsSync(join(a, "new.txt"))).toBe(false);
  });

  it("waits for a lock on a workspace's index that a live git may hold, and leaves it to it", async () => {
    const baseline = await snapshots.take(targetA(), "baseline", null);
    writeFileSync(join(a, "new.txt"), "new\n");
    const lock = `${snapshots.indexFile("s1", a)}.lock`;
    mkdirSync(join(snapshots.gitDir("s1"), "indexes"), { recursive: true });
    writeFileSync(lock, "");
    let settled = false;
    const restoring = restoreWorkspace(snapshots, targetA(), baseline).finally(() => {
      settled = true;
    });
    // A while within the git timeout: the lock is its writer's, and nothing was restored yet.
    await new Promise((r) => setTimeout(r, 300));
    expect(existsSync(lock)).toBe(true);
    expect(settled).toBe(false);
    expect(existsSync(join(a, "new.txt"))).toBe(true);
    // The writer is done: its lock goes, and the restore goes on.
    rmSync(lock);
    expect((await restoring).files).toEqual([{ path: "new.txt", change: "removed" }]);
  });
});
