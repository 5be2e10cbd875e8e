import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import {
  collectSnapshotGarbage,
  type RunRecords,
  SnapshotGcRefused,
  WorkspaceSnapshots,
} from "@looprun/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { dropSnapshots, snapshotsIn } from "./support";

// `looprun gc` on a real store: two sessions sharing the object store, runs the database has
// and runs it no longer has, workspaces' indexes, and the guards that refuse it.

const RUN_A = "01JA0000000000000000000AAA";
const RUN_B = "01JB0000000000000000000BBB";
const RUN_C = "01JC0000000000000000000CCC";

let dir: string;
let root: string;
let snapshots: WorkspaceSnapshots;
let ws1: string;
let ws2: string;

beforeEach(async () => {
  ({ dir, snapshots } = await snapshotsIn("looprun-snapshot-gc-"));
  root = join(dir, "snapshots");
  ws1 = join(dir, "ws1");
  ws2 = join(dir, "ws2");
  for (const ws of [ws1, ws2]) {
    mkdirSync(ws);
    writeFileSync(join(ws, "shared.txt"), "the same in both sessions\n");
  }
  writeFileSync(join(ws1, "s1-only.txt"), "in session s1's workspace before its run\n");
});
afterEach(() => dropSnapshots({ dir, snapshots }));

const git = (gitDir: string, ...args: string[]) =>
  execFileSync("git", [`--git-dir=${gitDir}`, ...args], { encoding: "utf8" }).trim();
const has = (id: string) => {
  try {
    git(join(root, "s2.git"), "cat-file", "-e", id);
    return true;
  } catch {
    return false;
  }
};
/** Every object `commit` reaches is in the store (git rev-list fails on a missing one). */
const whole = (gitDir: string, commit: string) => {
  git(gitDir, "rev-list", "--objects", commit);
  return true;
};
const blob = (text: string) =>
  execFileSync("git", ["hash-object", "--stdin"], { input: text, encoding: "utf8" }).trim();

/** Run A in session s1 (a.txt in two versions), run B in session s2. */
async function twoRuns() {
  const a = { sessionId: "s1", runId: RUN_A, workspace: ws1 };
  const a0 = await snapshots.take(a, "baseline", null);
  writeFileSync(join(ws1, "a.txt"), "only run A's first iteration\n");
  const a1 = await snapshots.take(a, "iteration 1 attempt 1", a0);
  writeFileSync(join(ws1, "a.txt"), "run A's second iteration, still in the workspace\n");
  const a2 = await snapshots.take(a, "iteration 2 attempt 1", a1);
  const b = { sessionId: "s2", runId: RUN_B, workspace: ws2 };
  const b0 = await snapshots.take(b, "baseline", null);
  writeFileSync(join(ws2, "b.txt"), "run B\n");
  const b1 = await snapshots.take(b, "iteration 1 attempt 1", b0);
  return { a0, a1, a2, b0, b1 };
}

/** A database of runs (id → the snapshot ids it names), answering as the real one does. */
const recordsOf =
  (runs: Record<string, string[]>) =>
  (runIds: readonly string[]): RunRecords => {
    const known = runIds.filter((id) => runs[id] !== undefined);
    return { runIds: known, snapshotIds: known.flatMap((id) => runs[id] ?? []) };
  };

describe("looprun gc (collectSnapshotGarbage)", () => {
  it("removes what only a run the database no longer has reached; keeps the rest whole", async () => {
    const { a1, a2, b0, b1 } = await twoRuns();
    const result = await collectSnapshotGarbage({
      root,
      records: recordsOf({ [RUN_B]: [b0, b1] }),
    });

    expect(result).toMatchObject({ sessions: 2, refsOfGoneRuns: 1, ownObjects: [] });
    expect(git(join(root, "s1.git"), "for-each-ref")).toBe("");
    // Run A's commits and a.txt are gone; s1-only.txt is in ws1's index (its baseline's `git
    // add -A` wrote it), which no ref kept reaches.
    expect(has(a1)).toBe(false);
    expect(has(a2)).toBe(false);
    expect(has(blob("only run A's first iteration\n"))).toBe(false);
    expect(has(blob("in session s1's workspace before its run\n"))).toBe(true);
    expect(whole(join(root, "s2.git"), b1)).toBe(true);
    expect(result.objectsRemoved).toBeGreaterThanOrEqual(5);
    expect(result.bytesRemoved).toBeGreaterThan(0);

    // A worker of another process (nothing remembered) snapshots ws1: `git add -A` does not hash
    // s1-only.txt again (the index knows it) and its tree names the blob the index kept.
    const next = new WorkspaceSnapshots({ root });
    try {
      writeFileSync(join(ws1, "c.txt"), "a later run\n");
      const later = await next.take(
        { sessionId: "s1", runId: RUN_C, workspace: ws1 },
        "baseline",
        null,
      );
      expect(whole(join(root, "s1.git"), later)).toBe(true);
      expect(git(join(root, "s1.git"), "show", `${later}:s1-only.txt`)).toBe(
        "in session s1's workspace before its run",
      );
      expect(git(join(root, "s1.git"), "show", `${later}:a.txt`)).toBe(
        "run A's second iteration, still in the workspace",
      );
    } finally {
      await next.close();
    }
  });

  it("keeps a snapshot the database names that no ref reaches (an abandoned attempt's)", async () => {
    const b = { sessionId: "s2", runId: RUN_B, workspace: ws2 };
    const b0 = await snapshots.take(b, "baseline", null);
    writeFileSync(join(ws2, "b.txt"), "attempt 1\n");
    const abandoned = await snapshots.take(b, "iteration 1 attempt 1", b0);
    writeFileSync(join(ws2, "b.txt"), "attempt 2\n");
    const retried = await snapshots.take(b, "iteration 1 attempt 2", b0);
    const named = await collectSnapshotGarbage({
      root,
      records: recordsOf({ [RUN_B]: [b0, abandoned, retried] }),
    });
    expect(named.objectsRemoved).toBe(0);
    expect(whole(join(root, "s2.git"), abandoned)).toBe(true);

    // Once the database no longer names it, it goes (the ref reaches only the retry).
    const unnamed = await collectSnapshotGarbage({
      root,
      records: recordsOf({ [RUN_B]: [b0, retried] }),
    });
    expect(unnamed.objectsRemoved).toBeGreaterThanOrEqual(2);
    expect(has(abandoned)).toBe(false);
    expect(has(blob("attempt 1\n"))).toBe(false);
    expect(whole(join(root, "s2.git"), retried)).toBe(true);
  });

  it("counts on a dry run what a real one removes, and changes nothing", async () => {
    const { b0, b1 } = await twoRuns();
    const records = recordsOf({ [RUN_B]: [b0, b1] });
    const objects = () => readdirSync(join(root, "objects")).sort().join(",");
    const before = objects();
    const dry = await collectSnapshotGarbage({ root, records, dryRun: true });
    expect(objects()).toBe(before);
    expect(git(join(root, "s1.git"), "for-each-ref", "--format=%(refname)")).toBe(
      `refs/looprun/${RUN_A}`,
    );
    const real = await collectSnapshotGarbage({ root, records });
    expect(dry.objectsRemoved).toBeGreaterThan(0);
    expect(real.objectsRemoved).toBe(dry.objectsRemoved);
    expect(real.refsOfGoneRuns).toBe(dry.refsOfGoneRuns);
    expect(real.objectsKept).toBe(dry.objectsKept);
  });

  it("is refused while another process that writes into the store may run", async () => {
    const { a1 } = await twoRuns();
    const writer = spawn("sleep", ["30"], { stdio: "ignore" });
    const marker = join(root, ".writers", `${hostname()}_${writer.pid}`);
    writeFileSync(marker, `${JSON.stringify({ pid: writer.pid, argv: ["looprun", "worker"] })}\n`);
    try {
      const refused = collectSnapshotGarbage({ root, records: recordsOf({}), force: false });
      await expect(refused).rejects.toBeInstanceOf(SnapshotGcRefused);
      await expect(refused).rejects.toThrow(`pid ${writer.pid} on ${hostname()} (looprun worker)`);
      expect(has(a1)).toBe(true);
    } finally {
      writer.kill("SIGKILL");
      await new Promise((resolve) => writer.once("exit", resolve));
    }
    // Another collector, of another host (this one cannot tell whether it runs), holds the store.
    writeFileSync(join(root, ".gc.lock"), "elsewhere 4242\n");
    await expect(collectSnapshotGarbage({ root, records: recordsOf({}) })).rejects.toThrow(
      "another looprun gc (pid 4242 on elsewhere) is collecting this store",
    );
    rmSync(join(root, ".gc.lock"));
    // Its process gone, its file is swept and the collection goes on.
    const done = await collectSnapshotGarbage({ root, records: recordsOf({ [RUN_B]: [] }) });
    expect(existsSync(marker)).toBe(false);
    expect(has(a1)).toBe(false);
    expect(done.refsOfGoneRuns).toBe(1);
    expect(existsSync(join(root, ".gc.lock"))).toBe(false);
  });

  it("makes a writer that starts while a collection runs wait for its end before writing", async () => {
    // A collector of another process holds the store; this process has not written into it yet.
    mkdirSync(root, { recursive: true });
    const collector = spawn("sleep", ["30"], { stdio: "ignore" });
    writeFileSync(join(root, ".gc.lock"), `${hostname()} ${collector.pid}\n`);
    let taken = false;
    const take = snapshots
      .take({ sessionId: "s1", runId: RUN_A, workspace: ws1 }, "baseline", null)
      .then((id) => {
        taken = true;
        return id;
      });
    try {
      await new Promise((resolve) => setTimeout(resolve, 1200));
      // It said it writes (a collection starting now would be refused), and wrote nothing.
      expect(readdirSync(join(root, ".writers"))).toEqual([`${hostname()}_${process.pid}`]);
      expect(taken).toBe(false);
      expect(existsSync(join(root, "s1.git"))).toBe(false);
    } finally {
      collector.kill("SIGKILL");
    }
    whole(join(root, "s1.git"), await take);
  });

  it("is refused when the database lacks the newest runs the refs name (an older copy), unless forced", async () => {
    const { a1, b1 } = await twoRuns();
    // It has run A, not run B, made after it: retention deletes the oldest runs first.
    const records = recordsOf({ [RUN_A]: [] });
    await expect(collectSnapshotGarbage({ root, records })).rejects.toThrow(
      `1 of the runs the refs of ${root} name are newer than any the database has (${RUN_B})`,
    );
    expect(has(b1)).toBe(true);
    const forced = await collectSnapshotGarbage({ root, records, force: true });
    expect(forced.refsOfGoneRuns).toBe(1);
    expect(has(b1)).toBe(false);
    expect(whole(join(root, "s1.git"), a1)).toBe(true);
  });

  it("is refused when none of the runs the refs name is in the database, unless forced", async () => {
    const { a1, b1 } = await twoRuns();
    const refused = collectSnapshotGarbage({ root, records: recordsOf({}) });
    await expect(refused).rejects.toThrow(
      /none of the runs the 2 refs of .* name is in the database/,
    );
    expect(has(a1) && has(b1)).toBe(true);
    const forced = await collectSnapshotGarbage({ root, records: recordsOf({}), force: true });
    expect(forced.refsOfGoneRuns).toBe(2);
    expect(has(a1) || has(b1)).toBe(false);
  });
});
