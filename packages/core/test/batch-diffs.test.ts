import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { WorkspaceSnapshots } from "@looprun/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { batchDiffs } from "../src/snapshots/iteration-diffs";
import { dropSnapshots, snapshotsIn } from "./support";

// The diffs of several iterations' snapshots come from one git diff-tree request
// (iteration-diffs.ts): each must be the bytes `git diff` gives for its pair, and the run's
// change the bytes of the baseline → the last snapshot.

let dir: string;
let ws: string;
let snapshots: WorkspaceSnapshots;
const target = () => ({ sessionId: "s1", runId: "01RUN", workspace: ws });
const git = (...args: string[]) =>
  execFileSync(
    "git",
    ["-c", "core.quotePath=false", `--git-dir=${snapshots.gitDir("s1")}`, ...args],
    {
      encoding: "utf8",
      env: { PATH: process.env.PATH, HOME: dir, GIT_CONFIG_NOSYSTEM: "1" },
      maxBuffer: 64 * 1024 * 1024,
    },
  );
const patchOf = (from: string, to: string) =>
  git("diff", "--binary", "--no-color", "--no-ext-diff", from, to);
const pairsOf = (ids: string[]) =>
  ids.slice(1).map((head, i) => ({ parent: ids[i] as string, head }));

beforeEach(async () => {
  ({ dir, snapshots } = await snapshotsIn("looprun-batchdiffs-"));
  ws = join(dir, "ws");
  mkdirSync(ws);
});
afterEach(() => dropSnapshots({ dir, snapshots }));

/** A baseline and five iterations: edits, a rename, a binary file, one that changes nothing. */
async function fiveIterations(): Promise<string[]> {
  writeFileSync(join(ws, "a.txt"), "one\ntwo\n");
  writeFileSync(join(ws, "rename me.txt"), "a file long enough to be found again as a rename\n");
  const ids = [await snapshots.take(target(), "baseline", null)];
  const step = async (n: number, change: () => void) => {
    change();
    ids.push(await snapshots.take(target(), `iteration ${n} attempt 1`, ids.at(-1) ?? null));
  };
  await step(1, () => writeFileSync(join(ws, "a.txt"), "one\nTWO\n"));
  await step(2, () => {
    rmSync(join(ws, "rename me.txt"));
    writeFileSync(join(ws, "renamed.txt"), "a file long enough to be found again as a rename\n");
  });
  await step(3, () => {});
  await step(4, () => writeFileSync(join(ws, "x.bin"), Buffer.from([0, 1, 2, 3])));
  await step(5, () => writeFileSync(join(ws, "tab\tü.txt"), "odd\n"));
  return ids;
}

describe("the diffs of several iterations from one git diff-tree", () => {
  it("gives each pair the bytes git diff gives, and the run's change up to the last", async () => {
    const ids = await fiveIterations();
    const baseline = ids[0] as string;
    const got = await batchDiffs(snapshots, {
      sessionId: "s1",
      baseline,
      pairs: pairsOf(ids),
      diffCapBytes: 256 * 1024,
      patchCapBytes: 8 * 1024 * 1024,
    });
    expect(snapshots.diffTrees).toEqual({ longLived: 1, oneShot: 0 });
    const expected = pairsOf(ids).map(({ parent, head }) => patchOf(parent, head));
    expect(got.diffs.map((d) => d.text)).toEqual(expected);
    expect(got.diffs[2]).toEqual({ text: "", bytes: 0, truncated: false });
    const last = ids.at(-1) as string;
    expect(got.change.patch.text).toBe(patchOf(baseline, last));
    expect(got.change.stat).toBe(git("diff", "--stat=200", "--no-color", baseline, last));
    expect(got.change.files).toEqual(
      git("diff", "--name-only", "-z", "--no-renames", baseline, last).split("\0").filter(Boolean),
    );
  });

  it("starts at the baseline as well as after it, and caps each diff on its own", async () => {
    const ids = await fiveIterations();
    const got = await batchDiffs(snapshots, {
      sessionId: "s1",
      baseline: ids[0] as string,
      pairs: pairsOf(ids).slice(0, 3),
      diffCapBytes: 60,
      patchCapBytes: 8 * 1024 * 1024,
    });
    pairsOf(ids)
      .slice(0, 3)
      .forEach(({ parent, head }, i) => {
        const whole = patchOf(parent, head);
        const diff = got.diffs[i];
        expect(diff?.bytes).toBe(Buffer.byteLength(whole));
        expect(diff?.truncated).toBe(Buffer.byteLength(whole) > 60);
        expect(whole.startsWith(diff?.text ?? "-")).toBe(true);
      });
    expect(got.change.patch.text).toBe(patchOf(ids[0] as string, ids[3] as string));
  });

  it("asks git pair by pair when the answer is cut before the last pair", async () => {
    writeFileSync(join(ws, "big.txt"), "");
    const ids = [await snapshots.take(target(), "baseline", null)];
    // Iteration 1's diff alone is over what the one request keeps of its answer (every cap
    // and 2 MiB more): the answer ends before the last pairs.
    const lines = (n: number) => `${"a line of text long enough to be counted\n".repeat(n)}`;
    for (const [n, text] of [lines(80_000), "short\n", "shorter\n"].entries()) {
      writeFileSync(join(ws, "big.txt"), text);
      ids.push(await snapshots.take(target(), `iteration ${n + 1} attempt 1`, ids.at(-1) ?? null));
    }
    const got = await batchDiffs(snapshots, {
      sessionId: "s1",
      baseline: ids[0] as string,
      pairs: pairsOf(ids),
      diffCapBytes: 100,
      patchCapBytes: 100,
    });
    pairsOf(ids).forEach(({ parent, head }, i) => {
      const whole = patchOf(parent, head);
      expect(got.diffs[i]?.bytes).toBe(Buffer.byteLength(whole));
      expect(got.diffs[i]?.truncated).toBe(Buffer.byteLength(whole) > 100);
      expect(whole.startsWith(got.diffs[i]?.text ?? "-")).toBe(true);
    });
    expect(got.diffs[0]?.truncated).toBe(true);
    const change = patchOf(ids[0] as string, ids[3] as string);
    expect(got.change.patch.bytes).toBe(Buffer.byteLength(change));
    expect(change.startsWith(got.change.patch.text)).toBe(true);
    expect(got.change.files).toEqual(["big.txt"]);
  });
});
