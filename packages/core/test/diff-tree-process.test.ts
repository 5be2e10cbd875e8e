import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { WorkspaceSnapshots } from "@looprun/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { iterationDiffs } from "../src/snapshots/iteration-diffs";
import { dropSnapshots, snapshotsIn } from "./support";

// An iteration's diffs come from a `git diff-tree --stdin` that stays running for the session
// (diff-tree-process.ts): it must give git's bytes request after request, see the objects
// written after it started, and leave the answer to a git process of its own when it fails.

let dir: string;
let ws: string;
let snapshots: WorkspaceSnapshots;
const target = () => ({ sessionId: "s1", runId: "01RUN", workspace: ws });
const git = (...args: string[]) =>
  execFileSync(
    "git",
    ["-c", "core.quotePath=false", `--git-dir=${snapshots.gitDir("s1")}`, ...args],
    { encoding: "utf8", env: { PATH: process.env.PATH, HOME: dir, GIT_CONFIG_NOSYSTEM: "1" } },
  );
const patchOf = (from: string, to: string) =>
  git("diff", "--binary", "--no-color", "--no-ext-diff", from, to);
/** The diff-tree processes this test process runs (from /proc: no `ps` needed). */
const diffTreePids = () =>
  readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
        const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
        return ppid === process.pid && args.includes("diff-tree") && args.includes("--stdin");
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);

const diffsOf = (baseline: string, parent: string, head: string, caps = 256 * 1024) =>
  iterationDiffs(snapshots, {
    sessionId: "s1",
    baseline,
    parent,
    head,
    diffCapBytes: caps,
    patchCapBytes: caps,
  });

/** Snapshots after iterations that each change the workspace. */
async function iterations(count: number): Promise<string[]> {
  writeFileSync(join(ws, "a.txt"), "zero\n");
  const ids = [await snapshots.take(target(), "baseline", null)];
  for (let n = 1; n <= count; n++) {
    writeFileSync(join(ws, "a.txt"), `${"line\n".repeat(n)}`);
    writeFileSync(join(ws, `f${n}.txt`), `file ${n}\n`);
    ids.push(await snapshots.take(target(), `iteration ${n} attempt 1`, ids.at(-1) ?? null));
  }
  return ids;
}

beforeEach(async () => {
  ({ dir, snapshots } = await snapshotsIn("looprun-difftree-"));
  ws = join(dir, "ws");
  mkdirSync(ws);
});
afterEach(() => dropSnapshots({ dir, snapshots }));

describe.skipIf(process.platform !== "linux")("a session's long-lived git diff-tree", () => {
  it("answers iteration after iteration with git's bytes, seeing the snapshots taken since it started", async () => {
    const [baseline, first, second] = (await iterations(2)) as [string, string, string];
    const got2 = await diffsOf(baseline, first, second);
    expect(got2.diff.text).toBe(patchOf(first, second));
    expect(got2.change.patch.text).toBe(patchOf(baseline, second));
    const pids = diffTreePids();
    expect(pids).toHaveLength(1);

    // Written after the process started: it reads the new loose objects.
    writeFileSync(join(ws, "a.txt"), "changed again\n");
    const third = await snapshots.take(target(), "iteration 3 attempt 1", second);
    const got3 = await diffsOf(baseline, second, third);
    expect(got3.diff.text).toBe(patchOf(second, third));
    expect(got3.change.patch.text).toBe(patchOf(baseline, third));
    expect(got3.change.stat).toBe(git("diff", "--stat=200", "--no-color", baseline, third));
    expect(diffTreePids()).toEqual(pids);
    expect(snapshots.diffTrees).toEqual({ longLived: 2, oneShot: 0 });
  });

  it("stays in step after an answer cut at its cap", async () => {
    const [baseline, first, second, third] = (await iterations(3)) as [
      string,
      string,
      string,
      string,
    ];
    const capped = await diffsOf(baseline, first, second, 40);
    expect(capped.diff.truncated).toBe(true);
    expect(capped.diff.bytes).toBe(Buffer.byteLength(patchOf(first, second)));
    expect(patchOf(first, second).startsWith(capped.diff.text)).toBe(true);
    const whole = await diffsOf(baseline, second, third);
    expect(whole.diff).toEqual({
      text: patchOf(second, third),
      bytes: Buffer.byteLength(patchOf(second, third)),
      truncated: false,
    });
    expect(whole.change.patch.text).toBe(patchOf(baseline, third));
  });

  it("leaves the answer to a git of its own when it dies, and a new one serves the next", async () => {
    const [baseline, first, second, third] = (await iterations(3)) as [
      string,
      string,
      string,
      string,
    ];
    await diffsOf(baseline, first, second);
    const [pid] = diffTreePids();
    process.kill(pid as number, "SIGKILL");
    const after = await diffsOf(baseline, second, third);
    expect(after.diff.text).toBe(patchOf(second, third));
    expect(after.change.patch.text).toBe(patchOf(baseline, third));
    const again = await diffsOf(baseline, first, third);
    expect(again.diff.text).toBe(patchOf(first, third));
    expect(diffTreePids()).toHaveLength(1);
    expect(diffTreePids()).not.toContain(pid);
    expect(snapshots.diffTrees.longLived + snapshots.diffTrees.oneShot).toBe(3);
  });

  it("answers as a git of its own would for a tree it does not have, then the next request", async () => {
    const [baseline, first] = (await iterations(1)) as [string, string];
    const tree = (id: string) => git("rev-parse", `${id}^{tree}`).trim();
    const oneShot = (pairs: string) =>
      execFileSync(
        "git",
        [`--git-dir=${snapshots.gitDir("s1")}`, "diff-tree", "--stdin", "-r", "-p"],
        {
          input: pairs,
          encoding: "utf8",
          stdio: ["pipe", "pipe", "ignore"],
        },
      );
    const bad = `${tree(baseline)} 0123456789abcdef0123456789abcdef01234567\n`;
    const good = `${tree(baseline)} ${tree(first)}\n`;
    // git complains on stderr: the long-lived process gives up and a git of its own answers.
    const got = await snapshots.diffTree("s1", ["-r", "-p"], bad, 1 << 20);
    expect(got.stdoutRaw.toString()).toBe(oneShot(bad));
    expect(snapshots.diffTrees).toEqual({ longLived: 0, oneShot: 1 });
    const ok = await snapshots.diffTree("s1", ["-r", "-p"], good, 1 << 20);
    expect(ok.stdoutRaw.toString()).toBe(oneShot(good));
    expect(ok.stdoutRaw.toString()).toContain("+line\n");
    expect(snapshots.diffTrees).toEqual({ longLived: 1, oneShot: 1 });
  });

  // Both ways a kept git starts: posix_spawn (the addon, as workers spawn), and Node's spawn
  // where this process spawns otherwise (useLauncher(false): no addon, or asked for).
  it.each([
    ["posix_spawn", ""],
    ["Node's spawn", "useLauncher(false);"],
  ])("does not keep its process alive while idle (started by %s)", async (_way, setup) => {
    const [baseline, first] = (await iterations(1)) as [string, string];
    const tree = (id: string) => git("rev-parse", `${id}^{tree}`).trim();
    const script = join(dir, "idle.mts");
    const core = new URL("../src/index.ts", import.meta.url).pathname;
    writeFileSync(
      script,
      [
        'import { writeFileSync } from "node:fs";',
        `import { useLauncher, WorkspaceSnapshots } from ${JSON.stringify(core)};`,
        setup,
        `const snapshots = new WorkspaceSnapshots({ root: ${JSON.stringify(join(dir, "snapshots"))} });`,
        `const pairs = ${JSON.stringify(`${tree(baseline)} ${tree(first)}\n`)};`,
        'const out = await snapshots.diffTree("s1", ["-r", "-p"], pairs, 1 << 20);',
        `writeFileSync(${JSON.stringify(join(dir, "idle.json"))}, JSON.stringify({ diff: out.stdoutRaw.toString(), ...snapshots.diffTrees }));`,
        // No close(): the idle diff-tree process (30 s before it ends) must not hold this one.
      ].join("\n"),
    );
    // Killed at the timeout (a signal) if the idle process held it.
    const child = spawnSync(process.execPath, ["--import", "tsx", script], {
      encoding: "utf8",
      timeout: 20_000,
    });
    expect(child.signal).toBeNull();
    expect(child.stderr).toBe("");
    const got = JSON.parse(readFileSync(join(dir, "idle.json"), "utf8"));
    expect(got).toMatchObject({ longLived: 1, oneShot: 0 });
    expect(got.diff).toContain("+line\n");
  });
});
