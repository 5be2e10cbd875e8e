import { execFileSync } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { restoreWorkspace, type WorkspaceSnapshots } from "@looprun/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { dropSnapshots, snapshotsIn } from "./support";

// Rollbacks across a directory turned into a symbolic link, and a nested repository the run
// made: what is restored, and what `files` tells.

let dir: string;
let ws: string;
let snapshots: WorkspaceSnapshots;
const target = () => ({ sessionId: "s1", runId: "run-1", workspace: ws });

beforeEach(async () => {
  ({ dir, snapshots } = await snapshotsIn("looprun-rollback-links-"));
  ws = join(dir, "ws");
  mkdirSync(join(ws, "d"), { recursive: true });
  mkdirSync(join(ws, "e"));
  writeFileSync(join(ws, "d", "z"), "d's z\n");
  writeFileSync(join(ws, "e", "y"), "e's y\n");
});
afterEach(() => dropSnapshots({ dir, snapshots }));

describe("rollback and symbolic links", () => {
  it("rolls back to and from a snapshot where a directory became a symbolic link", async () => {
    const baseline = await snapshots.take(target(), "baseline", null);
    // The run swaps d for a link to e (and keeps making snapshots, in-process).
    writeFileSync(join(ws, "x"), "x\n");
    const first = await snapshots.take(target(), "iteration 1 attempt 1", baseline);
    rmSync(join(ws, "d"), { recursive: true });
    symlinkSync("e", join(ws, "d"));
    const linked = await snapshots.take(target(), "iteration 2 attempt 1", first);

    const back = await restoreWorkspace(snapshots, target(), first);
    expect(lstatSync(join(ws, "d")).isDirectory()).toBe(true);
    expect(back.files).toEqual(
      expect.arrayContaining([
        { path: "d", change: "removed" },
        { path: "d/z", change: "restored" },
      ]),
    );
    // The link again: d/z, as the workspace has it now, lies beyond it once restored.
    const again = await restoreWorkspace(snapshots, target(), linked);
    expect(readlinkSync(join(ws, "d"))).toBe("e");
    expect(existsSync(join(ws, "e", "z"))).toBe(false);
    expect(again.files).toEqual(
      expect.arrayContaining([
        { path: "d", change: "restored" },
        { path: "d/z", change: "removed" },
      ]),
    );
    expect(again.files).toHaveLength(2);
  });

  it("leaves a nested repository the run made, and does not list it as removed", async () => {
    const baseline = await snapshots.take(target(), "baseline", null);
    const nested = join(ws, "n");
    execFileSync("git", ["init", "-q", nested]);
    writeFileSync(join(nested, "a"), "a\n");
    const env = { ...process.env, GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" };
    execFileSync("git", ["-C", nested, "add", "a"], { env });
    execFileSync(
      "git",
      ["-C", nested, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "c"],
      { env },
    );
    writeFileSync(join(ws, "made.txt"), "by the run\n");
    await snapshots.take(target(), "iteration 1 attempt 1", baseline);

    const restored = await restoreWorkspace(snapshots, target(), baseline);
    // A rollback does not remove a repository (its files are in no snapshot: gone for good).
    expect(existsSync(join(nested, "a"))).toBe(true);
    expect(restored.files).toEqual([{ path: "made.txt", change: "removed" }]);
  });
});
