import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { restoreWorkspace, type WorkspaceSnapshots } from "@looprun/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { dropSnapshots, snapshotsIn } from "./support";

// A rollback never removes a path the run did not create: files ignored at the baseline are
// in no snapshot, and stay when the run un-ignored them by editing `.gitignore`.

let dir: string;
let ws: string;
let snapshots: WorkspaceSnapshots;
const target = () => ({ sessionId: "s1", runId: "run-1", workspace: ws });

beforeEach(async () => {
  ({ dir, snapshots } = await snapshotsIn("looprun-rollback-ignored-"));
  ws = join(dir, "ws");
  mkdirSync(join(ws, "logs"), { recursive: true });
  writeFileSync(join(ws, "main.txt"), "main\n");
  writeFileSync(join(ws, ".gitignore"), "*.log\nlogs/\n");
  writeFileSync(join(ws, "debug.log"), "the user's log\n");
  writeFileSync(join(ws, "logs", "old.txt"), "kept for years\n");
});
afterEach(() => dropSnapshots({ dir, snapshots }));

describe("rollback and ignored files", () => {
  it("keeps files that were ignored at the baseline when the run edited .gitignore", async () => {
    const baseline = await snapshots.take(target(), "baseline", null);
    // The run un-ignores everything, and creates a file of its own.
    writeFileSync(join(ws, ".gitignore"), "");
    writeFileSync(join(ws, "made.txt"), "by the run\n");
    await snapshots.take(target(), "iteration 1 attempt 1", baseline);

    const restored = await restoreWorkspace(snapshots, target(), baseline);
    expect(readFileSync(join(ws, "debug.log"), "utf8")).toBe("the user's log\n");
    expect(readFileSync(join(ws, "logs", "old.txt"), "utf8")).toBe("kept for years\n");
    expect(readFileSync(join(ws, ".gitignore"), "utf8")).toBe("*.log\nlogs/\n");
    expect(existsSync(join(ws, "made.txt"))).toBe(false);
    expect(restored.files).toEqual(
      expect.arrayContaining([
        { path: ".gitignore", change: "restored" },
        { path: "made.txt", change: "removed" },
      ]),
    );
    expect(restored.files).toHaveLength(2);
    // A second rollback finds the workspace as the baseline left it: nothing to do.
    expect((await restoreWorkspace(snapshots, target(), baseline)).files).toEqual([]);
  });

  it("keeps in its `before` a file the run tracked and then ignored, as it was", async () => {
    const baseline = await snapshots.take(target(), "baseline", null);
    writeFileSync(join(ws, "t.tmp"), "1\n");
    const first = await snapshots.take(target(), "iteration 1 attempt 1", baseline);
    writeFileSync(join(ws, ".gitignore"), "*.log\nlogs/\n*.tmp\n");
    writeFileSync(join(ws, "t.tmp"), "2\n");
    await snapshots.take(target(), "iteration 2 attempt 1", first);

    const restored = await restoreWorkspace(snapshots, target(), first);
    expect(readFileSync(join(ws, "t.tmp"), "utf8")).toBe("1\n");
    // What the rollback replaced can be had back from `before`.
    const shown = await snapshots.gitIn("s1", null, ["show", `${restored.before}:t.tmp`]);
    expect(shown.stdout).toBe("2\n");
  });
});
