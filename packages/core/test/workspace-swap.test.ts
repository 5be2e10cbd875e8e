import { existsSync, mkdirSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runStep } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { makeRun, removeDir, resources, tempDir } from "./support";

// The API stores a run's workspace with its symlinks followed, inside WORKSPACES_ROOT. What is
// put into that path afterwards (a command of the session, a person) must not take the run
// elsewhere: the worker checks the path again at every step.

let dir: string;
let ws: string;
let outside: string;
let store: MemoryRunStore;
beforeEach(async () => {
  dir = await tempDir("looprun-swap-");
  ws = join(dir, "root", "ws");
  outside = join(dir, "outside");
  mkdirSync(join(dir, "root"));
  mkdirSync(outside);
  store = new MemoryRunStore();
});
afterEach(async () => {
  await removeDir(dir);
});

const AGENT = { type: "command" as const, command: "pwd -P > where.txt" };

describe("a workspace whose path a symlink was put into", () => {
  it("is not followed when the run starts: the run fails, nothing is written where the link points", async () => {
    symlinkSync(outside, ws);
    const run = makeRun({ agent: AGENT, testCommand: "true", cooldownMs: 0 }, ws);
    store.add(run);
    expect(await runStep(resources(store), run.id)).toMatchObject({
      status: "failed",
      reason: "error",
    });
    expect((await store.getRun(run.id))?.summary).toBe(
      `phase_failed: workspace: the workspace ${ws} leads to ${outside} now (a symlink was put in its path): the run does not follow it`,
    );
    expect(readdirSync(outside)).toEqual([]);
  });

  it("is not followed after a cooldown, nor a link to nothing", async () => {
    const run = makeRun({ agent: AGENT, testCommand: "false", cooldownMs: 60_000 }, ws);
    store.add(run);
    expect(await runStep(resources(store), run.id)).toMatchObject({ kind: "cooldown" });
    rmSync(ws, { recursive: true });
    symlinkSync(join(dir, "not-there"), ws);
    expect(await runStep(resources(store), run.id)).toMatchObject({
      status: "failed",
      reason: "error",
    });
    expect((await store.getRun(run.id))?.summary).toContain(
      `the workspace ${ws} leads to a symlink to nothing now`,
    );
    expect(existsSync(join(dir, "not-there"))).toBe(false);
    expect(store.iterationsOf(run.id)).toHaveLength(1);
  });

  // An agent (or a command) of the run swaps its own workspace for a link mid-iteration.
  const swap = () => `W=$(pwd); cd ..; mv "$W" "$W.real"; ln -s ${outside} "$W"`;

  it("is not followed by the validation when the agent swapped it", async () => {
    const agent = { type: "command" as const, command: `echo hi > mine.txt; ${swap()}` };
    const run = makeRun({ agent, testCommand: "pwd -P > where.txt", cooldownMs: 0 }, ws);
    store.add(run);
    expect(await runStep(resources(store), run.id)).toMatchObject({
      status: "failed",
      reason: "error",
    });
    expect(readdirSync(outside)).toEqual([]);
    const [it1] = store.iterationsOf(run.id);
    expect(it1).toMatchObject({ status: "failed", outcome: "error", validation: [] });
    const events = store.eventsOf(run.id);
    expect(events.map((e) => e.type).slice(-3)).toEqual([
      "agent_finished",
      "phase_failed",
      "run_finished",
    ]);
    expect(events.find((e) => e.type === "phase_failed")?.data).toMatchObject({
      iteration: 1,
      phase: "workspace",
      skipped: ["validation", "review"],
      error: expect.stringContaining(`leads to ${outside} now`),
    });
  });

  it("is not snapshotted when a validation command swapped it", async () => {
    writeFileSync(join(outside, "precious.txt"), "not the run's\n");
    const run = makeRun(
      { agent: { type: "command", command: "true" }, testCommand: swap(), cooldownMs: 0 },
      ws,
    );
    store.add(run);
    expect(await runStep(resources(store), run.id)).toMatchObject({
      status: "failed",
      reason: "error",
    });
    expect(store.eventsOf(run.id).find((e) => e.type === "phase_failed")?.data).toMatchObject({
      phase: "workspace",
      skipped: [],
    });
    // No snapshot of the place the link leads to: the run's latest is still its baseline.
    const stored = (await store.getRun(run.id))!;
    expect(stored.baselineSnapshot).toMatch(/^[0-9a-f]{40}$/);
    expect(stored.latestSnapshot).toBe(stored.baselineSnapshot);
  });

  it("is not used by the next iteration of the same step (no cooldown between them)", async () => {
    // Iteration 1 fails its test and swaps the workspace as its last act; iteration 2 must not
    // start in the place the link leads to.
    const agent = {
      type: "command" as const,
      command: `if [ "$LOOPRUN_ITERATION" = 1 ]; then true; else pwd -P > where.txt; fi`,
    };
    const run = makeRun(
      {
        agent,
        testCommand: `if [ "$LOOPRUN_ITERATION" = 1 ]; then ${swap()}; fi; false`,
        cooldownMs: 0,
        maxIterations: 3,
      },
      ws,
    );
    store.add(run);
    await runStep(resources(store), run.id);
    expect(readdirSync(outside)).toEqual([]);
    expect((await store.getRun(run.id))?.status).toBe("failed");
  });
});
