import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runStep } from "@looprun/core";
import { describe, expect, it } from "vitest";
import { engine, useEngineFixture } from "./engine-support";
import { makeRun, resources } from "./support";

useEngineFixture();

// The API resolves a run's workspace; the worker that starts the run creates it.
describe("a run's workspace", () => {
  it("creates the run's workspace when it starts (nested directories included)", async () => {
    const workspace = join(engine.ws, "not", "yet");
    const run = makeRun(
      { agent: { type: "command", command: "echo hi > made" }, testCommand: "test -f made" },
      workspace,
    );
    engine.store.add(run);
    const result = await runStep(resources(engine.store), run.id);
    expect(result).toEqual({ kind: "finished", status: "succeeded", reason: "success" });
    expect(readFileSync(join(workspace, "made"), "utf8")).toBe("hi\n");
  });

  it("fails the run with phase_failed (workspace) when its workspace cannot be created", async () => {
    writeFileSync(join(engine.ws, "a-file"), "");
    const run = makeRun(
      { agent: { type: "command", command: "true" }, testCommand: "true" },
      join(engine.ws, "a-file", "sub"),
    );
    engine.store.add(run);
    const result = await runStep(resources(engine.store), run.id);
    expect(result).toEqual({ kind: "finished", status: "failed", reason: "error" });
    const failed = engine.store.eventsOf(run.id).find((e) => e.type === "phase_failed");
    expect(failed?.data).toMatchObject({ iteration: 0, phase: "workspace" });
    expect((await engine.store.getRun(run.id))?.summary).toMatch(
      /^phase_failed: workspace: could not create the workspace /,
    );
    expect(engine.store.iterationsOf(run.id)).toHaveLength(0);
  });

  it("says that the workspace is gone when the agent removed it, not that a program is missing", async () => {
    const workspace = join(engine.ws, "doomed");
    const run = makeRun(
      {
        agent: { type: "command", command: 'rm -rf "$LOOPRUN_WORKSPACE"' },
        testCommand: "true",
      },
      workspace,
    );
    engine.store.add(run);
    const result = await runStep(resources(engine.store), run.id);
    expect(result).toEqual({ kind: "finished", status: "failed", reason: "error" });
    const [it1] = engine.store.iterationsOf(run.id);
    expect(it1?.validation[0]?.output).toContain(
      `could not start the command: its working directory ${workspace} does not exist`,
    );
    expect((await engine.store.getRun(run.id))?.summary).toContain(
      `its working directory ${workspace} does not exist`,
    );
  });

  it("waits while a rollback holds the workspace, starting nothing, and starts once it is gone", async () => {
    const run = makeRun(
      { agent: { type: "command", command: "touch ran" }, testCommand: "test -f ran" },
      engine.ws,
    );
    engine.store.add(run);
    const now = Date.now();
    engine.store.holds.set(engine.ws, now + 60_000);
    const res = resources(engine.store, { now: () => now });

    const waited = await runStep(res, run.id);
    expect(waited).toEqual({ kind: "cooldown", until: now + 500 });
    const queued = await engine.store.getRun(run.id);
    expect(queued).toMatchObject({
      status: "queued",
      startedAt: null,
      progress: "waiting: a rollback is restoring the workspace",
    });
    expect(engine.store.eventsOf(run.id).map((e) => e.type)).toEqual([]);
    expect(existsSync(join(engine.ws, "ran"))).toBe(false);

    engine.store.holds.clear();
    expect(await runStep(resources(engine.store), run.id)).toEqual({
      kind: "finished",
      status: "succeeded",
      reason: "success",
    });
  });

  it("waits while a rollback of another of its session's workspaces holds the session", async () => {
    // The restore uses the session's snapshot store, which the run's baseline writes to.
    const run = makeRun(
      { agent: { type: "command", command: "touch ran" }, testCommand: "test -f ran" },
      engine.ws,
    );
    engine.store.add(run);
    const now = Date.now();
    engine.store.holds.set(`session:${run.sessionId}`, now + 60_000);
    engine.store.holds.set("session:another", now + 60_000);
    const res = resources(engine.store, { now: () => now });

    expect(await runStep(res, run.id)).toEqual({ kind: "cooldown", until: now + 500 });
    expect(await engine.store.getRun(run.id)).toMatchObject({ status: "queued", startedAt: null });
    expect(engine.store.snapshotsOf(run.id)).toEqual([]);
    expect(existsSync(join(engine.ws, "ran"))).toBe(false);

    engine.store.holds.delete(`session:${run.sessionId}`);
    expect(await runStep(res, run.id)).toMatchObject({ kind: "finished", status: "succeeded" });
  });

  it("starts the run in full when the hold its claim saw is gone by the step's own look", async () => {
    const run = makeRun(
      {
        agent: { type: "command", command: "touch ran" },
        testCommand: "test -f ran",
        maxMinutes: 5,
      },
      engine.ws,
    );
    engine.store.add(run);
    const now = Date.now();
    // The claim sees the hold (it leaves the run queued); the rollback ends right after.
    let looks = 0;
    engine.store.workspaceHeldUntil = async () => (looks++ === 0 ? now + 60_000 : null);
    const res = resources(engine.store, { now: () => now });

    expect(await runStep(res, run.id)).toMatchObject({ kind: "finished", status: "succeeded" });
    expect(looks).toBe(2);
    const done = await engine.store.getRun(run.id);
    expect(done).toMatchObject({ startedAt: now, deadlineAt: now + 5 * 60_000 });
    const types = engine.store.eventsOf(run.id).map((e) => e.type);
    expect(types.filter((t) => t === "run_started")).toHaveLength(1);
    expect(types.indexOf("run_started")).toBeLessThan(types.indexOf("iteration_started"));
  });
});
