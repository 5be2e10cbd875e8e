import { execFileSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join, relative } from "node:path";
import { runStep } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { makeRun, removeDir, resources, tempDir, testSnapshotsDir, waitFor } from "./support";

const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", ["-c", "user.name=User", "-c", "user.email=user@example.com", ...args], {
    cwd,
    encoding: "utf8",
    env: { PATH: process.env.PATH, HOME: cwd, GIT_CONFIG_NOSYSTEM: "1" },
  });

/** Every file under `dir` (relative paths → contents), without `.git` and git-ignored logs. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      if (name === ".git" || name.endsWith(".log")) continue;
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else out[relative(dir, path)] = readFileSync(path, "latin1");
    }
  };
  walk(dir);
  return out;
}

let dir: string;
let ws: string;
let store: MemoryRunStore;
beforeEach(async () => {
  dir = await tempDir("looprun-snap-");
  ws = join(dir, "ws");
  mkdirSync(ws);
  store = new MemoryRunStore();
});
afterEach(async () => {
  await removeDir(dir);
});

/** A workspace that is the user's own git repository, with one commit. */
function userRepository(): string {
  writeFileSync(join(ws, "keep.txt"), "kept\n");
  writeFileSync(join(ws, "edit.txt"), "one\ntwo\nthree\n");
  writeFileSync(join(ws, "remove.txt"), "to be removed\n");
  writeFileSync(join(ws, "bin.dat"), Buffer.from([0, 1, 2, 3, 255, 254, 0, 9]));
  writeFileSync(join(ws, ".gitignore"), "*.log\n");
  git(ws, "init", "-q");
  git(ws, "add", "-A");
  git(ws, "commit", "-q", "-m", "the user's commit");
  return git(ws, "rev-parse", "HEAD").trim();
}

/** Iteration 1 edits, creates, deletes and writes an ignored log; iteration 2 goes deeper. */
const AGENT = [
  'if [ "$LOOPRUN_ITERATION" = 1 ]; then',
  "  printf 'one\\nTWO\\nthree\\n' > edit.txt; echo new > new.txt; rm remove.txt; echo noise > build.log",
  "else",
  "  echo newer >> new.txt; mkdir -p sub/dir; echo deep > sub/dir/deep.txt; printf '\\000\\377binary' > bin.dat",
  "fi",
].join("\n");

describe("workspace snapshots", () => {
  it("stores each iteration's diff and a run patch that git apply applies to the original workspace", async () => {
    const userHead = userRepository();
    const original = join(dir, "original");
    cpSync(ws, original, { recursive: true });
    rmSync(join(original, ".git"), { recursive: true, force: true });

    const run = makeRun(
      {
        agent: { type: "command", command: AGENT },
        testCommand: "test -f sub/dir/deep.txt",
        cooldownMs: 0,
      },
      ws,
    );
    store.add(run);
    expect(await runStep(resources(store), run.id)).toMatchObject({ status: "succeeded" });

    const final = (await store.getRun(run.id))!;
    const [s1, s2] = store.snapshotsOf(run.id);
    expect(store.snapshotsOf(run.id)).toHaveLength(2);
    expect(final.baselineSnapshot).toMatch(/^[0-9a-f]{40}$/);
    expect(s1).toMatchObject({
      n: 1,
      attempt: 1,
      parentId: final.baselineSnapshot,
      diffTruncated: false,
    });
    expect(s2).toMatchObject({ n: 2, attempt: 1, parentId: s1?.snapshotId, diffTruncated: false });
    expect(final.latestSnapshot).toBe(s2?.snapshotId);

    expect(s1?.diff).toContain("diff --git a/edit.txt b/edit.txt");
    expect(s1?.diff).toContain("-two\n+TWO\n");
    expect(s1?.diff).toContain("new file mode 100644");
    expect(s1?.diff).toContain("deleted file mode 100644");
    expect(s1?.diff).not.toContain("build.log");
    expect(s1?.diff).not.toContain(".git/");
    expect(s2?.diff).not.toContain("edit.txt");
    expect(s2?.diff).toContain("+newer\n");
    expect(s2?.diff).toContain("b/sub/dir/deep.txt");
    expect(s2?.diff).toContain("GIT binary patch");
    expect(s1?.diffBytes).toBe(Buffer.byteLength(s1?.diff ?? ""));

    const change = store.changes.get(run.id)!;
    expect(change).toMatchObject({
      baselineSnapshot: final.baselineSnapshot,
      headSnapshot: s2?.snapshotId,
      iteration: 2,
      files: ["bin.dat", "edit.txt", "new.txt", "remove.txt", "sub/dir/deep.txt"],
    });
    expect(change.stat).toContain("5 files changed");

    // The patch turns a copy of the original workspace into the final one.
    const patchFile = join(dir, "run.patch");
    writeFileSync(patchFile, change.patch!);
    execFileSync("git", ["apply", "--check", patchFile], { cwd: original });
    execFileSync("git", ["apply", patchFile], { cwd: original });
    expect(tree(original)).toEqual(tree(ws));

    // The user's own repository is untouched: same HEAD, one commit, their index unchanged.
    expect(git(ws, "rev-parse", "HEAD").trim()).toBe(userHead);
    expect(git(ws, "rev-list", "--count", "--all").trim()).toBe("1");
    expect(git(ws, "status", "--porcelain")).toContain(" M edit.txt");
    // The snapshots live outside the workspace, in the session's own bare git dir.
    const snapshotsDir = join(testSnapshotsDir(), `${run.sessionId}.git`);
    expect(
      git(snapshotsDir, "--git-dir", snapshotsDir, "rev-parse", `refs/looprun/${run.id}`).trim(),
    ).toBe(s2?.snapshotId);
  });

  it("compares a rerun attempt with the last decided iteration, not with the attempt that was cut short", async () => {
    const go = join(dir, "go");
    const holding = join(dir, "holding");
    // The reviewer of attempt 1 waits (until the worker shuts down); later ones approve.
    const reviewer =
      `if [ ! -f ${holding} ]; then touch ${holding}; while [ ! -f ${go} ]; do sleep 0.05; done; fi; ` +
      `echo '{"blockingIssues": [], "nonBlockingIssues": [], "score": 80, "fixPlan": []}'`;
    const run = makeRun(
      {
        agent: { type: "command", command: "echo more >> log.txt" },
        review: { type: "command", command: reviewer },
        cooldownMs: 0,
      },
      ws,
    );
    store.add(run);
    const shutdown = new AbortController();
    const first = runStep(resources(store), run.id, { shutdown: shutdown.signal });
    await waitFor(() => existsSync(holding), "the first review to start");
    shutdown.abort();
    expect(await first).toEqual({ kind: "handed_back" });
    writeFileSync(go, "");
    expect(await runStep(resources(store), run.id)).toMatchObject({ status: "succeeded" });

    const final = (await store.getRun(run.id))!;
    const [a1, a2] = store.snapshotsOf(run.id);
    expect([a1?.attempt, a2?.attempt]).toEqual([1, 2]);
    // Both attempts of iteration 1 compare with the baseline; the second holds both lines.
    expect(a1?.parentId).toBe(final.baselineSnapshot);
    expect(a2?.parentId).toBe(final.baselineSnapshot);
    expect(a2?.diff).toContain("+more\n+more\n");
    expect(final.latestSnapshot).toBe(a2?.snapshotId);
    expect(store.changes.get(run.id)?.headSnapshot).toBe(a2?.snapshotId);
  });

  it("cuts an iteration's diff at the cap and keeps no patch larger than the patch cap", async () => {
    const run = makeRun(
      {
        agent: { type: "command", command: "seq 1 2000 > numbers.txt" },
        testCommand: "true",
        cooldownMs: 0,
      },
      ws,
    );
    store.add(run);
    await runStep(resources(store, { diffCapBytes: 300, patchCapBytes: 1000 }), run.id);
    const [s1] = store.snapshotsOf(run.id);
    expect(s1?.diffTruncated).toBe(true);
    expect(s1?.diffBytes).toBeGreaterThan(8000);
    expect(Buffer.byteLength(s1?.diff ?? "")).toBeLessThanOrEqual(300);
    expect(s1?.diff.endsWith("\n")).toBe(true);
    const change = store.changes.get(run.id)!;
    expect(change.patch).toBeNull();
    expect(change.patchBytes).toBe(s1?.diffBytes);
    expect(change.files).toEqual(["numbers.txt"]);
  });

  it("fails the run with phase_failed when the workspace cannot be snapshotted", async () => {
    // A file where the snapshots root should be: git cannot create its repository there.
    const notADirectory = join(dir, "occupied");
    writeFileSync(notADirectory, "");
    const run = makeRun(
      { agent: { type: "command", command: "touch ran.txt" }, testCommand: "true" },
      ws,
    );
    store.add(run);
    expect(await runStep(resources(store, { snapshotsDir: notADirectory }), run.id)).toEqual({
      kind: "finished",
      status: "failed",
      reason: "error",
    });
    expect(store.iterationsOf(run.id)).toEqual([]);
    expect(readdirSync(ws)).toEqual([]);
    const events = store.eventsOf(run.id);
    expect(events.map((e) => e.type)).toEqual(["run_started", "phase_failed", "run_finished"]);
    expect(events[1]?.data).toMatchObject({
      phase: "snapshot",
      skipped: ["implementation", "validation", "review"],
    });
    expect((await store.getRun(run.id))?.summary).toMatch(
      /^phase_failed: snapshot: could not snapshot the workspace/,
    );
  });
});
