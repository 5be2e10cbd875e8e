import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type RunRecord, runStep } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { gateReport } from "../src/validation/gates";
import { makeRun, removeDir, resources, tempDir } from "./support";

let ws: string;
let store: MemoryRunStore;
beforeEach(async () => {
  ws = await tempDir("looprun-safety-");
  store = new MemoryRunStore();
});
afterEach(async () => {
  await removeDir(ws);
});

function seed(body: Record<string, unknown>): RunRecord {
  const run = makeRun({ cooldownMs: 0, ...body }, ws);
  store.add(run);
  return run;
}

describe("successThreshold", () => {
  it("counts the gates that must pass, rounding 0.8 × 10 to 8", () => {
    const results = (codes: number[]) =>
      codes.map((exitCode, i) => ({ command: `c${i}`, exitCode, durationMs: 1, output: "" }));
    expect(gateReport(results([0, 0, 0, 0, 0, 0, 0, 0, 1, 1]), 0.8)).toEqual({
      ok: true,
      passed: 8,
      total: 10,
      failed: ["c8", "c9"],
    });
    expect(gateReport(results([0, 0, 0, 0, 0, 0, 0, 1, 1, 1]), 0.8).ok).toBe(false);
    expect(gateReport(results([0, 1]), 1).ok).toBe(false);
    expect(gateReport([], 1).ok).toBe(true);
  });

  it("succeeds with partial when 1 of 2 gates passes under 0.5, naming the failed gate", async () => {
    const run = seed({
      testCommand: "true",
      validationCommands: ["echo lint-broken; exit 3"],
      successThreshold: 0.5,
    });
    const result = await runStep(resources(store), run.id);
    expect(result).toEqual({ kind: "finished", status: "succeeded", reason: "success" });
    const final = (await store.getRun(run.id))!;
    expect(final.partial).toEqual({
      passed: 1,
      total: 2,
      failed: ["echo lint-broken; exit 3"],
    });
    expect(final.summary).toBe(
      "succeeded after 1 iteration; partial: 1 of 2 gates passed (failed: echo lint-broken; exit 3)",
    );
    expect(final.metrics.validationFailures).toBe(0);
    const passed = store.eventsOf(run.id).find((e) => e.type === "validation_passed");
    expect(passed?.data).toMatchObject({ partial: true, failed: ["echo lint-broken; exit 3"] });
  });

  it("tells the agent how many gates must pass, and the feedback how many did", async () => {
    const run = seed({
      testCommand: "true",
      validationCommands: ["exit 1", "exit 2", "true"],
      successThreshold: 0.6,
      maxIterations: 2,
    });
    expect(await runStep(resources(store), run.id)).toMatchObject({ status: "failed" });
    const [first, second] = store.iterationsOf(run.id);
    expect(first?.prompt).toContain(
      "- at least 3 of these 4 commands must exit 0:\n  - `true`\n  - `exit 1`\n  - `exit 2`\n  - `true`",
    );
    expect(first?.prompt).not.toContain("must exit 0\n");
    expect(first?.feedback).toContain(
      "Validation failed:\n\n2 of 4 gates passed (failed: exit 1, exit 2); at least 3 must pass.\n\n$ exit 1",
    );
    expect(second?.prompt).toContain("at least 3 must pass.");
  });

  it("keeps requiring every gate by default", async () => {
    const run = seed({
      testCommand: "true",
      validationCommands: ["exit 3"],
      maxIterations: 1,
    });
    const result = await runStep(resources(store), run.id);
    expect(result).toMatchObject({ status: "failed", reason: "max_iterations" });
    expect((await store.getRun(run.id))!.partial).toBeNull();
  });

  it("is not partial when every gate passes", async () => {
    const run = seed({ testCommand: "true", validationCommands: ["true"], successThreshold: 0.5 });
    expect(await runStep(resources(store), run.id)).toMatchObject({ status: "succeeded" });
    const final = (await store.getRun(run.id))!;
    expect(final.partial).toBeNull();
    expect(final.summary).toBe("succeeded after 1 iteration");
  });
});

describe("stall detection", () => {
  it("ends a run that changes nothing and keeps failing the same way as stalled", async () => {
    writeFileSync(join(ws, "a.txt"), "as it was\n");
    const run = seed({
      agent: { type: "command", command: "echo thinking hard" },
      // The output differs every time (a timestamp): only command and exit code count.
      testCommand: "date +%s%N; exit 1",
      maxIterations: 10,
    });
    const result = await runStep(resources(store), run.id);
    expect(result).toEqual({ kind: "finished", status: "failed", reason: "stalled" });
    const final = (await store.getRun(run.id))!;
    // Iteration 1 has nothing to compare with; 2, 3 and 4 made no progress.
    expect(final.iteration).toBe(4);
    expect(final.stalledIterations).toBe(3);
    expect(final.summary).toBe(
      "stalled: 3 iterations in a row changed nothing in the workspace and failed the same gates",
    );
    const events = store.eventsOf(run.id);
    expect(events.at(-1)).toMatchObject({
      type: "run_finished",
      data: { status: "failed", reason: "stalled" },
    });
    expect(store.iterationsOf(run.id).every((i) => i.status === "failed")).toBe(true);
  });

  it("honours maxStalledIterations", async () => {
    const run = seed({ testCommand: "exit 1", maxIterations: 10, maxStalledIterations: 1 });
    expect(await runStep(resources(store), run.id)).toMatchObject({ reason: "stalled" });
    expect((await store.getRun(run.id))!.iteration).toBe(2);
  });

  it("does not count an iteration that changed the workspace", async () => {
    const run = seed({
      agent: { type: "command", command: 'echo "$LOOPRUN_ITERATION" >> progress.txt' },
      testCommand: "exit 1",
      maxIterations: 5,
      maxStalledIterations: 1,
    });
    expect(await runStep(resources(store), run.id)).toMatchObject({ reason: "max_iterations" });
    expect((await store.getRun(run.id))!.stalledIterations).toBe(0);
  });

  it("does not count an iteration that fails differently", async () => {
    // Same workspace, but the failing command's exit code changes every iteration.
    const run = seed({
      agent: { type: "command", command: "true" },
      testCommand: 'exit "$LOOPRUN_ITERATION"',
      maxIterations: 4,
      maxStalledIterations: 1,
    });
    expect(await runStep(resources(store), run.id)).toMatchObject({ reason: "max_iterations" });
  });

  it("ends by budget when the budget is spent by the iteration that would stall the run", async () => {
    // With the default of 3, iteration 4 stalls a run that does nothing; a budget of 4
    // iterations is spent by the same iteration: the design's budget end wins.
    const run = seed({
      agent: { type: "command", command: "true" },
      testCommand: "exit 1",
      maxIterations: 4,
    });
    expect(await runStep(resources(store), run.id)).toMatchObject({
      status: "failed",
      reason: "max_iterations",
    });
    const final = (await store.getRun(run.id))!;
    expect(final).toMatchObject({
      iteration: 4,
      summary: "failed_budget_exhausted",
      stalledIterations: 3,
    });
    expect(store.eventsOf(run.id).map((e) => e.type)).toContain("budget_exhausted");
  });

  it("counts across cooldowns (the count is stored with the run)", async () => {
    const run = seed({ testCommand: "exit 1", maxIterations: 10, cooldownMs: 5 });
    const res = resources(store);
    let result = await runStep(res, run.id);
    while (result.kind === "cooldown") result = await runStep(res, run.id);
    expect(result).toMatchObject({ status: "failed", reason: "stalled" });
    expect((await store.getRun(run.id))!.iteration).toBe(4);
  });
});
