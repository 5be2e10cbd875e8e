import { existsSync, mkdirSync, readdirSync, rmSync, symlinkSync } from "node:fs";
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
});
