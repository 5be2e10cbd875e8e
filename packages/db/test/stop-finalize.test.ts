import { ABANDONED_AGENT_OUTPUT } from "@looprun/core";
import { beforeEach, describe, expect, it } from "vitest";
import { type RepoEngine, repoEngines } from "./repo-engines";
import { iteration } from "./store-fixtures";
import { newRun } from "./support";

// A stop that ends a run no worker holds (its worker is gone: the API's stop of a run whose
// job is not held, the reconciler's), on both engines: the attempt in flight is abandoned, and
// an agent that was what ran gets a result (killed) and its `agent_finished`.

const engines = repoEngines();

describe.each(engines)("finalizeStop on %s", (_name, open) => {
  let engine: RepoEngine;
  beforeEach(async () => {
    let close: () => Promise<void>;
    ({ engine, close } = await open());
    return () => close();
  });

  /** A run whose worker started iteration 1 at `startedAt` (with `agent`), then died. */
  async function crashedMidIteration(agent: { exitCode: number; output: string } | null) {
    const input = newRun({});
    await engine.repo.createRun(input);
    const { epoch } = (await engine.store.claimRun(input.id))!.run;
    const startedAt = Date.now();
    await engine.store.commit(
      input.id,
      epoch,
      {
        run: { status: "running", startedAt, iteration: 1 },
        insertIteration: iteration(input.id, 1, 1, {
          startedAt,
          agent: agent && { ...agent, durationMs: 5 },
        }),
      },
      startedAt,
    );
    return { id: input.id, startedAt };
  }

  it("gives the abandoned attempt's agent a result, as its agent_finished says", async () => {
    const { id, startedAt } = await crashedMidIteration(null);
    await engine.repo.requestStop(id, startedAt + 1000);
    expect(await engine.repo.finalizeStop(id, startedAt + 2500)).toMatchObject({
      status: "stopped",
    });
    const [attempt] = await engine.repo.listIterations(id);
    expect(attempt).toMatchObject({ status: "abandoned", outcome: "stopped" });
    expect(attempt?.agent).toEqual({
      exitCode: null,
      output: ABANDONED_AGENT_OUTPUT,
      durationMs: 2500,
    });
    const events = await engine.repo.listEvents(id, 0, 100);
    expect(events.map((e) => e.type)).toEqual([
      "run_queued",
      "stop_requested",
      "agent_finished",
      "run_finished",
    ]);
    expect(events[2]?.data).toMatchObject({
      iteration: 1,
      exitCode: null,
      durationMs: 2500,
      abandoned: true,
    });
  });

  it("keeps the agent result of an attempt whose agent had ended (its validation ran)", async () => {
    const { id, startedAt } = await crashedMidIteration({ exitCode: 0, output: "done\n" });
    await engine.repo.requestStop(id, startedAt + 1000);
    await engine.repo.finalizeStop(id, startedAt + 2500);
    const [attempt] = await engine.repo.listIterations(id);
    expect(attempt).toMatchObject({ status: "abandoned", outcome: "stopped" });
    expect(attempt?.agent).toEqual({ exitCode: 0, output: "done\n", durationMs: 5 });
    const events = await engine.repo.listEvents(id, 0, 100);
    expect(events.map((e) => e.type)).toEqual(["run_queued", "stop_requested", "run_finished"]);
  });
});
