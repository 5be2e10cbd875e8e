import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { restoreWorkspace, runStep, WorkspaceSnapshots } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { makeRun, removeDir, resources, tempDir, testSnapshotsDir } from "./support";

/** Every file and directory under `dir` (relative path → contents and mode), `.git` aside. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      if (name === ".git") continue;
      const path = join(d, name);
      const st = statSync(path);
      if (st.isDirectory()) {
        out[`${relative(dir, path)}/`] = "dir";
        walk(path);
      } else {
        out[relative(dir, path)] =
          `${(st.mode & 0o777).toString(8)} ${readFileSync(path, "latin1")}`;
      }
    }
  };
  walk(dir);
  return out;
}

const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", ["-c", "user.name=U", "-c", "user.email=u@example.com", ...args], {
    cwd,
    encoding: "utf8",
    env: { PATH: process.env.PATH, HOME: cwd, GIT_CONFIG_NOSYSTEM: "1" },
  });

/** Iteration 1 edits, creates (in a new directory) and deletes; iteration 2 goes on; both fail. */
const AGENT = [
  'if [ "$LOOPRUN_ITERATION" = 1 ]; then',
  "  printf 'EDITED\\n' > edit.txt; rm remove.txt; mkdir -p new/deep; echo one > new/deep/one.txt; chmod +x keep.sh",
  "else",
  "  echo two >> edit.txt; echo created > created2.txt; rm keep.sh; printf '\\000\\377' > bin.dat",
  "fi",
].join("\n");

/** A run of one iteration that fails (its agent runs `command`), restoring its workspace as it does. */
const failingWithRollback = (command: string) =>
  makeRun(
    {
      agent: { type: "command", command },
      testCommand: "false",
      maxIterations: 1,
      cooldownMs: 0,
      rollbackOnFailure: true,
    },
    ws,
  );

let dir: string;
let ws: string;
let store: MemoryRunStore;
beforeEach(async () => {
  dir = await tempDir("looprun-rollback-");
  ws = join(dir, "ws");
  mkdirSync(ws);
  writeFileSync(join(ws, "edit.txt"), "original\n");
  writeFileSync(join(ws, "remove.txt"), "to be removed\n");
  writeFileSync(join(ws, "keep.sh"), "echo kept\n");
  writeFileSync(join(ws, "bin.dat"), Buffer.from([1, 2, 3]));
  writeFileSync(join(ws, ".gitignore"), "*.log\n");
  chmodSync(join(ws, "keep.sh"), 0o644);
  // The workspace is the user's own repository: its .git must survive every rollback.
  git(ws, "init", "-q");
  git(ws, "add", "-A");
  git(ws, "commit", "-q", "-m", "user");
  store = new MemoryRunStore();
});
afterEach(async () => {
  await removeDir(dir);
});

const snapshots = () => new WorkspaceSnapshots({ root: testSnapshotsDir() });

describe("rollback", () => {
  it("restores the workspace exactly to the baseline and to the snapshot after iteration n", async () => {
    const before = tree(ws);
    const run = makeRun(
      {
        agent: { type: "command", command: AGENT },
        testCommand: "false",
        maxIterations: 2,
        cooldownMs: 0,
      },
      ws,
    );
    store.add(run);
    await runStep(resources(store), run.id);
    const [s1, s2] = store.snapshotsOf(run.id);
    expect(s2).toBeDefined();
    const final = (await store.getRun(run.id))!;
    const target = { sessionId: run.sessionId, runId: run.id, workspace: ws };
    const userHead = git(ws, "rev-parse", "HEAD").trim();

    // Files the run never saw: a new one, and a git-ignored log (left alone).
    writeFileSync(join(ws, "late.txt"), "after the run\n");
    writeFileSync(join(ws, "debug.log"), "ignored\n");

    const back0 = await restoreWorkspace(snapshots(), target, final.baselineSnapshot!);
    const { "debug.log": log, ...restored0 } = tree(ws);
    expect(log).toBe("644 ignored\n");
    expect(restored0).toEqual(before);
    expect(back0.files).toEqual(
      expect.arrayContaining([
        { path: "edit.txt", change: "restored" },
        { path: "remove.txt", change: "restored" },
        { path: "keep.sh", change: "restored" },
        { path: "bin.dat", change: "restored" },
        { path: "new/deep/one.txt", change: "removed" },
        { path: "created2.txt", change: "removed" },
        { path: "late.txt", change: "removed" },
      ]),
    );
    expect(back0.files).toHaveLength(7);
    expect(git(ws, "rev-parse", "HEAD").trim()).toBe(userHead);
    expect(git(ws, "status", "--porcelain")).toBe("");

    // Forward again, to the snapshot after iteration 1.
    const back1 = await restoreWorkspace(snapshots(), target, s1!.snapshotId);
    const { "debug.log": _log, ...restored1 } = tree(ws);
    // As iteration 1 left it: edited, made executable, created in a new directory, deleted.
    const { "remove.txt": _removed, ...kept } = before;
    expect(restored1).toEqual({
      ...kept,
      "edit.txt": "644 EDITED\n",
      "keep.sh": "755 echo kept\n",
      "new/": "dir",
      "new/deep/": "dir",
      "new/deep/one.txt": "644 one\n",
    });
    expect(back1.files.map((f) => f.path).sort()).toEqual([
      "edit.txt",
      "keep.sh",
      "new/deep/one.txt",
      "remove.txt",
    ]);
    const refOf = (ref: string) =>
      git(
        ws,
        "--git-dir",
        join(testSnapshotsDir(), `${run.sessionId}.git`),
        "rev-parse",
        ref,
      ).trim();
    // The run's own snapshot chain is untouched; the workspace before each restore is kept.
    expect(refOf(`refs/looprun/${run.id}`)).toBe(s2!.snapshotId);
    // Each rollback's `before` follows the previous one's, under the rollback ref.
    expect(await snapshots().parentOf(run.sessionId, back1.before)).toBe(back0.before);
    expect(refOf(`refs/looprun/rollback/${run.id}`)).toBe(back1.before);
  });

  it("tells as removed the ignored files of a directory that becomes a file again", async () => {
    // `edit.txt` becomes a directory holding an ignored log (the workspace ignores *.log).
    const run = makeRun(
      {
        agent: {
          type: "command",
          command:
            "rm edit.txt; mkdir -p edit.txt/deep; echo t > edit.txt/t; echo x > edit.txt/deep/x.log",
        },
        testCommand: "false",
        maxIterations: 1,
      },
      ws,
    );
    store.add(run);
    await runStep(resources(store), run.id);
    const final = (await store.getRun(run.id))!;
    const target = { sessionId: run.sessionId, runId: run.id, workspace: ws };
    const back = await restoreWorkspace(snapshots(), target, final.baselineSnapshot!);
    expect(readFileSync(join(ws, "edit.txt"), "utf8")).toBe("original\n");
    expect(back.files).toEqual(
      expect.arrayContaining([
        { path: "edit.txt", change: "restored" },
        { path: "edit.txt/t", change: "removed" },
        { path: "edit.txt/deep/x.log", change: "removed" },
      ]),
    );
  });

  it("rollbackOnFailure leaves the workspace as before the run, keeping the failed attempt's patch", async () => {
    const before = tree(ws);
    const run = makeRun(
      {
        agent: { type: "command", command: AGENT },
        testCommand: "false",
        maxIterations: 2,
        cooldownMs: 0,
        rollbackOnFailure: true,
      },
      ws,
    );
    store.add(run);
    expect(await runStep(resources(store), run.id)).toMatchObject({
      status: "failed",
      reason: "max_iterations",
    });
    expect(tree(ws)).toEqual(before);
    const change = store.changes.get(run.id)!;
    expect(change.patch).toContain("created2.txt");
    expect(change.patch).toContain("new/deep/one.txt");
    const events = store.eventsOf(run.id);
    const rollback = events.find((e) => e.type === "rollback_applied");
    expect(rollback?.data).toMatchObject({ iteration: 0, onFailure: true });
    expect(events.at(-1)?.type).toBe("run_finished");
    // The failed attempt, applied to the restored workspace, gives its result back.
    writeFileSync(join(dir, "run.patch"), change.patch!);
    git(ws, "apply", join(dir, "run.patch"));
    expect(tree(ws)["created2.txt"]).toBe("644 created\n");
  });

  it("rollbackOnFailure restores nothing through a symlink the agent put in the workspace's place", async () => {
    const outside = join(dir, "outside");
    mkdirSync(outside);
    writeFileSync(join(outside, "important.txt"), "keep me\n");
    // The agent swaps its workspace for a link to a directory out of it.
    const run = failingWithRollback(`d=$(pwd); cd ..; mv "$d" "$d-moved"; ln -s '${outside}' "$d"`);
    store.add(run);
    expect(await runStep(resources(store), run.id)).toMatchObject({ status: "failed" });
    expect(readdirSync(outside)).toEqual(["important.txt"]);
    const events = store.eventsOf(run.id);
    expect(events.some((e) => e.type === "rollback_applied")).toBe(false);
    // The run fails as its validation would start (the workspace leads elsewhere), and its
    // rollback is not done either.
    expect(events.filter((e) => e.type === "phase_failed").map((e) => e.data)).toMatchObject([
      { phase: "workspace", error: expect.stringContaining("a symlink was put in its path") },
      { phase: "rollback", error: expect.stringContaining("a symlink was put in its path") },
    ]);
  });

  it("rollbackOnFailure leaves the files of another run active in the workspace (one inside it too)", async () => {
    const other = makeRun({ testCommand: "true" }, join(ws, "inner"), { sessionId: "other" });
    store.add({ ...other, status: "running" as const, startedAt: Date.now() });
    const run = failingWithRollback("mkdir -p inner; echo theirs > inner/y.txt; echo mine > x.txt");
    store.add(run);
    expect(await runStep(resources(store), run.id)).toMatchObject({ status: "failed" });
    expect(readFileSync(join(ws, "inner", "y.txt"), "utf8")).toBe("theirs\n");
    expect(readFileSync(join(ws, "x.txt"), "utf8")).toBe("mine\n");
    const failed = store.eventsOf(run.id).find((e) => e.type === "phase_failed");
    expect(failed?.data.error).toContain(`run ${other.id} is active`);
    // The hold is given back: a rollback of the workspace can be taken again.
    expect(await store.workspaceHeldUntil(run, Date.now())).toBeNull();
  });

  it("does not roll back a run that succeeds", async () => {
    const run = makeRun(
      {
        agent: { type: "command", command: "echo done > done.txt" },
        testCommand: "test -f done.txt",
        cooldownMs: 0,
        rollbackOnFailure: true,
      },
      ws,
    );
    store.add(run);
    expect(await runStep(resources(store), run.id)).toMatchObject({ status: "succeeded" });
    expect(readFileSync(join(ws, "done.txt"), "utf8")).toBe("done\n");
    expect(store.eventsOf(run.id).some((e) => e.type === "rollback_applied")).toBe(false);
  });

  it("rollbackOnFailure restores nothing once another worker has taken the run", async () => {
    // The run is taken over (its epoch moves on) right after the agent's write: this worker
    // ends its iteration in failure but holds the run no more.
    class TakenOverStore extends MemoryRunStore {
      override async commit(...args: Parameters<MemoryRunStore["commit"]>) {
        const written = await super.commit(...args);
        if (args[2].updateIteration?.patch.agent) await this.claimRun(args[0]);
        return written;
      }
    }
    const taken = new TakenOverStore();
    const run = failingWithRollback("echo mine > made.txt");
    taken.add(run);
    expect(await runStep(resources(taken), run.id)).toEqual({ kind: "lease_lost" });
    // The workspace is the new holder's: left as it is.
    expect(readFileSync(join(ws, "made.txt"), "utf8")).toBe("mine\n");
    expect(taken.eventsOf(run.id).some((e) => e.type === "rollback_applied")).toBe(false);
  });
});
