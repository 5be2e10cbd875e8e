import { LeaseLostError, runStep } from "@looprun/core";
import { describe, expect, it } from "vitest";
import { engine, seed, useEngineFixture } from "./engine-support";
import { resources } from "./support";

useEngineFixture();

describe("MemoryRunStore fencing", () => {
  it("throws LeaseLostError for a stale epoch and writes nothing", async () => {
    const run = seed({ testCommand: "true" });
    const first = (await engine.store.claimRun(run.id))!;
    const second = (await engine.store.claimRun(run.id))!;
    expect(second.run.epoch).toBe(first.run.epoch + 1);
    await expect(
      engine.store.commit(
        run.id,
        first.run.epoch,
        {
          run: { progress: "stale" },
          events: [
            { type: "run_started", data: { budget: { elapsedMs: 0, remainingIterations: 6 } } },
          ],
        },
        Date.now(),
      ),
    ).rejects.toBeInstanceOf(LeaseLostError);
    expect((await engine.store.getRun(run.id))?.progress).toBe("queued");
    expect(engine.store.eventsOf(run.id)).toEqual([]);
  });

  it("does not bump the epoch of a finished run", async () => {
    const run = seed({ testCommand: "true" });
    await runStep(resources(engine.store), run.id);
    const { epoch } = (await engine.store.getRun(run.id))!;
    expect((await engine.store.claimRun(run.id))?.run.epoch).toBe(epoch);
  });
});
