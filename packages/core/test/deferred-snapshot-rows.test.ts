import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { type RunRecord, runStep } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { snapshotsOf } from "../src/engine/snapshot-step";
import {
  FaultyStore,
  makeRun,
  removeDir,
  resources,
  tempDir,
  testSnapshotsDir,
  waitFor,
} from "./support";

/**
 * With cooldown 0 and no reviewer, an iteration's snapshot diffs are computed beside a later
 * iteration — the next one once it has run a while, or the one after 16 quicker ones, in one
 * git request — and written when ready, or with the run's end (RunContext.deferSnapshot).
 */

/** A store whose `commit` never returns for one chosen write: the worker died during it. */
const dyingStore = () => new FaultyStore(() => new Promise<RunRecord>(() => {}));

let dir: string;
let ws: string;
beforeEach(async () => {
  dir = await tempDir("looprun-deferred-");
  ws = join(dir, "ws");
  mkdirSync(ws);
});
afterEach(async () => {
  await removeDir(dir);
});

const AGENT = 'echo "line $LOOPRUN_ITERATION" >> lines.txt';
const TEST = '[ "$(wc -l < lines.txt)" -ge 3 ]';

describe("snapshot rows written after their iteration's decision", () => {
  it("are all stored by the run's end, each with its own diff, and the run's change is the last", async () => {
    const store = new MemoryRunStore();
    const run = makeRun(
      { agent: { type: "command", command: AGENT }, testCommand: TEST, cooldownMs: 0 },
      ws,
    );
    store.add(run);
    expect(await runStep(resources(store), run.id)).toMatchObject({ status: "succeeded" });
    const snapshots = store.snapshotsOf(run.id);
    expect(snapshots.map((s) => [s.n, s.attempt])).toEqual([
      [1, 1],
      [2, 1],
      [3, 1],
    ]);
    snapshots.forEach((s, i) => {
      expect(s.diff).toContain(`+line ${i + 1}\n`);
      expect(s.diff).not.toContain(`+line ${i}\n`);
    });
    const final = (await store.getRun(run.id))!;
    expect(final.latestSnapshot).toBe(snapshots[2]?.snapshotId);
    expect(store.changes.get(run.id)).toMatchObject({
      iteration: 3,
      headSnapshot: final.latestSnapshot,
    });
    expect(store.changes.get(run.id)?.patch).toContain("+line 1\n+line 2\n+line 3\n");
  });

  it("are written while the next iteration's agent still runs, as soon as they are ready", async () => {
    const store = new MemoryRunStore();
    const agent =
      'if [ "$LOOPRUN_ITERATION" = 2 ]; then touch waiting; sleep 6; fi; echo line >> lines.txt';
    const run = makeRun(
      {
        agent: { type: "command", command: agent },
        testCommand: '[ "$(wc -l < lines.txt)" -ge 2 ]',
        cooldownMs: 0,
      },
      ws,
    );
    store.add(run);
    const step = runStep(resources(store), run.id);
    await waitFor(() => existsSync(join(ws, "waiting")), "iteration 2's agent runs");
    await waitFor(
      () => store.snapshotsOf(run.id).some((s) => s.n === 1),
      "iteration 1's snapshot rows",
      5000,
    );
    expect(store.iterationsOf(run.id).map((it) => [it.n, it.status])).toEqual([
      [1, "failed"],
      [2, "running"],
    ]);
    expect(store.changes.get(run.id)).toMatchObject({ iteration: 1 });
    expect(await step).toMatchObject({ status: "succeeded" });
    expect(store.snapshotsOf(run.id).map((s) => s.n)).toEqual([1, 2]);
    expect(store.changes.get(run.id)).toMatchObject({ iteration: 2 });
  });

  it("are computed again by the next worker when the one that decided died before writing them", async () => {
    const store = dyingStore();
    const run = makeRun(
      { agent: { type: "command", command: AGENT }, testCommand: TEST, cooldownMs: 0 },
      ws,
    );
    store.add(run);
    // The write of iteration 1's snapshot rows never lands, nor anything after it: none of the
    // iterations runs long enough for the rows to be computed beside it (however slow the
    // machine), so that write is the run's end, with the rows of all three.
    store.faultOn = (m) => m.insertSnapshots?.some((s) => s.n === 1) === true;
    const dead = runStep(resources(store, { snapshotRowsAfterMs: 60_000 }), run.id);
    const deadline = Date.now() + 10_000;
    while (store.faultOn !== null && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    expect(store.faultOn).toBeNull();
    expect(store.snapshotsOf(run.id)).toEqual([]);
    void dead;

    // Another worker (its own process: its own snapshot store) takes the run over.
    const next = resources(store, { snapshotsDir: testSnapshotsDir() });
    expect(await runStep(next, run.id)).toMatchObject({ status: "succeeded" });
    const snapshots = store.snapshotsOf(run.id);
    const first = snapshots.find((s) => s.n === 1);
    expect(first).toMatchObject({ attempt: 1, diffTruncated: false });
    expect(first?.diff).toContain("+line 1\n");
    // Its commit's parent is the baseline: the diff is iteration 1's alone.
    const final = (await store.getRun(run.id))!;
    expect(first?.parentId).toBe(final.baselineSnapshot);
    const gitDir = join(testSnapshotsDir(), `${run.sessionId}.git`);
    const diff = execFileSync(
      "git",
      [`--git-dir=${gitDir}`, "diff", first!.parentId!, first!.snapshotId],
      {
        encoding: "utf8",
      },
    );
    expect(first?.diff).toBe(diff);
    const second = snapshots.find((s) => s.n === 2);
    expect(second?.parentId).toBe(first?.snapshotId);
    expect(second?.diff).toContain("+line 2\n");
    expect(second?.diff).not.toContain("+line 1\n");
    // Iteration 3 was rerun (attempt 2; the dead worker's agent had run: 4 lines, success)
    // and every decided iteration has its rows: the walk back from the last decided one
    // found both that the dead worker left out.
    expect(snapshots.map((s) => [s.n, s.attempt])).toEqual([
      [1, 1],
      [2, 1],
      [3, 2],
    ]);
    expect(store.changes.get(run.id)).toMatchObject({
      iteration: 3,
      headSnapshot: final.latestSnapshot,
    });
  });

  it("of quick iterations are computed together: sixteen in one git request, the rest with the run's end", async () => {
    const store = new MemoryRunStore();
    const run = makeRun(
      {
        agent: { type: "command", command: AGENT },
        testCommand: '[ "$(wc -l < lines.txt)" -ge 20 ]',
        cooldownMs: 0,
        maxIterations: 20,
      },
      ws,
    );
    store.add(run);
    // No iteration runs long enough for the rows to be computed beside it.
    const res = resources(store, { snapshotRowsAfterMs: 60_000 });
    expect(await runStep(res, run.id)).toMatchObject({ status: "succeeded" });
    const snapshots = store.snapshotsOf(run.id);
    expect(snapshots.map((s) => s.n)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    const final = (await store.getRun(run.id))!;
    snapshots.forEach((s, i) => {
      expect(s.diff).toContain(`+line ${i + 1}\n`);
      expect(s.diff).not.toContain(`+line ${i}\n`);
      expect(s.parentId).toBe(i === 0 ? final.baselineSnapshot : snapshots[i - 1]?.snapshotId);
    });
    expect(store.changes.get(run.id)).toMatchObject({
      iteration: 20,
      headSnapshot: final.latestSnapshot,
    });
    // Iterations 1–16 when the 17th started, 17–20 with the run's end.
    const { longLived, oneShot } = snapshotsOf(res).diffTrees;
    expect(longLived + oneShot).toBe(2);
  });
});
