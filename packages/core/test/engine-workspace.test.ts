import { readFileSync, writeFileSync } from "node:fs";
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
});
