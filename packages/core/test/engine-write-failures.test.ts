import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { type RunMutation, runStep } from "@looprun/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FaultyStore, makeRun, removeDir, resources, tempDir } from "./support";

// A write of the engine that fails (not a lost lease: a database that is busy or gone for a
// moment) ends the run `failed` / `error`, and the iteration in flight with it: no iteration
// is left `running` under a finished run.

/** A store whose `commit` throws once, for the first write `faultOn` picks. */
const flakyStore = () =>
  new FaultyStore(() => Promise.reject(new Error("SQLITE_BUSY: database is locked")));

let dir: string;
beforeEach(async () => {
  dir = await tempDir("looprun-write-failures-");
  mkdirSync(join(dir, "ws"));
});
afterEach(async () => {
  await removeDir(dir);
});

describe("an engine write that fails", () => {
  it.each([
    ["the decision that ends the run", (m: RunMutation) => m.run?.status === "succeeded"],
    [
      "the decision that sends it round again",
      (m: RunMutation) => m.updateIteration?.patch.status === "failed",
    ],
  ])("(%s) ends the run and its iteration together", async (_what, failOn) => {
    const store = flakyStore();
    const run = makeRun(
      {
        agent: { type: "command", command: "echo x >> lines" },
        testCommand: '[ "$(wc -l < lines)" -ge 2 ]',
        cooldownMs: 0,
      },
      join(dir, "ws"),
    );
    store.add(run);
    store.faultOn = failOn;
    expect(await runStep(resources(store), run.id)).toMatchObject({
      status: "failed",
      reason: "error",
    });
    const iterations = store.iterationsOf(run.id);
    const last = iterations.at(-1);
    expect(last).toMatchObject({ status: "failed", outcome: "error" });
    expect(last?.finishedAt).not.toBeNull();
    expect(iterations.filter((it) => it.status === "running")).toEqual([]);
  });
});
