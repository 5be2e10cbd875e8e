import { LeaseLostError, type Plan } from "@looprun/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { claimSuite } from "./claim-suite";
import { engineOnStoreSuite } from "./engine-on-store-suite";
import { recordsSuite } from "./records-suite";
import { event, iteration } from "./store-fixtures";
import type { StoreHarness } from "./store-harness";
import { newRun } from "./support";

/**
 * The behaviour every RunStore has, whatever the engine: the same tests for SQLite and
 * PostgreSQL. `open` gives a harness on an empty database for each test.
 */
export function runStoreSuite(engine: string, open: () => Promise<StoreHarness>): void {
  let h: StoreHarness;
  beforeEach(async () => {
    h = await open();
  });
  afterEach(async () => {
    await h.close();
  });

  claimSuite(engine, () => h);

  describe(`${engine}: submit`, () => {
    it("reads a submitted run back as createRun returned it (its row is built, not read back)", async () => {
      const run = await h.createRun(newRun({ maxIterations: 4 }, { sessionId: "read-back" }));
      expect(run).toMatchObject({ status: "queued", progress: "queued", iteration: 0, epoch: 0 });
      expect(await h.getRun(run.id)).toEqual(run);
    });
  });

  describe(`${engine}: commit`, () => {
    it("applies the run patch, the iteration changes and the events together", async () => {
      const run = await h.createRun(newRun({}));
      const { epoch } = (await h.store.claimRun(run.id))!.run;
      const after = await h.store.commit(
        run.id,
        epoch,
        {
          run: {
            status: "running",
            startedAt: 10,
            deadlineAt: 20,
            iteration: 1,
            progress: "working",
          },
          insertIteration: iteration(run.id, 1, 1),
          events: [event("run_started"), event("iteration_started")],
        },
        // After run_queued: an event is never dated before the one it follows.
        run.createdAt + 10,
      );
      expect(after).toMatchObject({
        status: "running",
        startedAt: 10,
        deadlineAt: 20,
        iteration: 1,
        progress: "working",
      });
      await h.store.commit(
        run.id,
        epoch,
        {
          updateIteration: {
            n: 1,
            attempt: 1,
            patch: {
              agent: { exitCode: 0, output: "ok", durationMs: 5 },
              status: "passed",
              outcome: "complete",
            },
          },
        },
        11,
      );
      expect(await h.listIterations(run.id)).toEqual([
        expect.objectContaining({
          n: 1,
          attempt: 1,
          status: "passed",
          outcome: "complete",
          prompt: "prompt 1/1",
          agent: { exitCode: 0, output: "ok", durationMs: 5 },
          validation: [],
        }),
      ]);
      expect((await h.listEvents(run.id, 0, 100)).map((e) => [e.seq, e.type, e.at])).toEqual([
        [1, "run_queued", run.createdAt],
        [2, "run_started", run.createdAt + 10],
        [3, "iteration_started", run.createdAt + 10],
      ]);
      expect(await h.getRun(run.id)).toEqual(after);
    });

    it("round-trips every field of the run record", async () => {
      const run = await h.createRun(newRun({ maxIterations: 4 }));
      const { epoch } = (await h.store.claimRun(run.id))!.run;
      const plan: Plan = {
        version: 2,
        reason: "step 1 kept failing",
        steps: [
          { id: 1, title: "t", detail: null, status: "in_progress", failures: 1, note: null },
        ],
      };
      const after = await h.store.commit(
        run.id,
        epoch,
        {
          run: {
            status: "running",
            reason: null,
            summary: "half way",
            iteration: 2,
            progress: "p",
            metrics: { ...run.metrics, iterations: 1, tokens: 1234 },
            consecutiveFailures: 1,
            stalledIterations: 2,
            partial: { passed: 1, total: 2, failed: ["npm run lint"] },
            latestReviewId: "r1",
            baselineSnapshot: "b",
            latestSnapshot: "l",
            plan,
            activePgid: 4321,
            pausedMs: 2_000,
            startedAt: 1_700_000_000_123,
            deadlineAt: 1_700_000_999_999,
          },
        },
        5,
      );
      expect(after).toMatchObject({
        summary: "half way",
        metrics: { iterations: 1, tokens: 1234 },
        partial: { passed: 1, total: 2, failed: ["npm run lint"] },
        plan,
        activePgid: 4321,
        pausedMs: 2_000,
        startedAt: 1_700_000_000_123,
        deadlineAt: 1_700_000_999_999,
      });
      expect(await h.getRun(run.id)).toEqual(after);
      expect(after.spec).toEqual(run.spec);
    });

    it("throws LeaseLostError for a stale epoch and writes nothing", async () => {
      const run = await h.createRun(newRun({}));
      const stale = (await h.store.claimRun(run.id))!.run.epoch;
      await h.store.claimRun(run.id);
      const before = await h.getRun(run.id);
      await expect(
        h.store.commit(
          run.id,
          stale,
          {
            run: { status: "running", progress: "stale writer" },
            insertIteration: iteration(run.id, 1, 1),
            events: [event("run_started")],
          },
          Date.now(),
        ),
      ).rejects.toSatisfy(
        (e) => e instanceof LeaseLostError && e.epoch === stale && e.runId === run.id,
      );
      expect(await h.getRun(run.id)).toEqual(before);
      expect(await h.listIterations(run.id)).toEqual([]);
      expect((await h.listEvents(run.id, 0, 100)).map((e) => e.type)).toEqual(["run_queued"]);
    });

    it("throws LeaseLostError for a run that does not exist", async () => {
      await expect(h.store.commit("nope", 1, {}, 1)).rejects.toBeInstanceOf(LeaseLostError);
    });

    it("keeps a stop request when a patch sets running", async () => {
      const run = await h.createRun(newRun({}));
      const { epoch } = (await h.store.claimRun(run.id))!.run;
      await h.requestStop(run.id, Date.now());
      const after = await h.store.commit(
        run.id,
        epoch,
        { run: { status: "running", progress: "p" } },
        Date.now(),
      );
      expect(after.status).toBe("stopping");
      expect(after.progress).toBe("p");
      expect((await h.getRun(run.id))?.status).toBe("stopping");
      // A pause for a person does not win over it either; a terminal status does.
      const paused = await h.store.commit(
        run.id,
        epoch,
        { run: { status: "awaiting_approval" } },
        Date.now(),
      );
      expect(paused.status).toBe("stopping");
      const ended = await h.store.commit(
        run.id,
        epoch,
        { run: { status: "stopped", reason: "stopped" } },
        Date.now(),
      );
      expect(ended.status).toBe("stopped");
    });

    it("never dates an event before the one that precedes it (writers queue for the lock)", async () => {
      const run = await h.createRun(newRun({}));
      const { epoch } = (await h.store.claimRun(run.id))!.run;
      const queuedAt = (await h.listEvents(run.id, 0, 10))[0]!.at;
      await h.store.commit(
        run.id,
        epoch,
        { events: [event("run_started"), event("iteration_started")] },
        queuedAt + 5000,
      );
      // A stop whose clock was read before the worker's write went in.
      await h.requestStop(run.id, queuedAt + 4000);
      await h.store.commit(run.id, epoch, { events: [event("agent_started")] }, queuedAt + 6000);
      const list = await h.listEvents(run.id, 0, 10);
      expect(list.map((e) => [e.seq, e.type, e.at - queuedAt])).toEqual([
        [1, "run_queued", 0],
        [2, "run_started", 5000],
        [3, "iteration_started", 5000],
        [4, "stop_requested", 5000],
        [5, "agent_started", 6000],
      ]);
    });

    it("holds a workspace for a run's own rollback: not while another run is active in it, one inside it too", async () => {
      const mine = await h.createRun(newRun({}, { sessionId: "hold-a", workspace: "/w/hold" }));
      const inner = await h.createRun(
        newRun({}, { sessionId: "hold-b", workspace: "/w/hold/inner" }),
      );
      // Its own activity does not bar it; the other run's does.
      expect(await h.store.holdWorkspaceFor(mine, 1000, 60_000)).toEqual({
        held: false,
        activeRunId: inner.id,
      });
      const claimed = (await h.store.claimRun(inner.id))!;
      await h.store.commit(
        inner.id,
        claimed.run.epoch,
        { run: { status: "failed", reason: "error", finishedAt: 1500 } },
        1500,
      );
      expect(await h.store.holdWorkspaceFor(mine, 2000, 60_000)).toEqual({ held: true });
      // Runs of the workspace wait for it, until it is given back.
      expect(await h.store.workspaceHeldUntil(inner, 2000)).toBe(62_000);
      await h.store.releaseWorkspaceOf(mine);
      expect(await h.store.workspaceHeldUntil(inner, 2000)).toBeNull();
    });

    it("ends a stopping run nobody holds (finalizeStop), fencing any earlier holder", async () => {
      const run = await h.createRun(newRun({}, { sessionId: "s" }));
      const claimed = (await h.store.claimRun(run.id))!;
      await h.store.commit(
        run.id,
        claimed.run.epoch,
        {
          run: { status: "running", startedAt: 1000, iteration: 1 },
          insertIteration: iteration(run.id, 1, 1, { prompt: "p" }),
        },
        1000,
      );
      await h.requestStop(run.id, 2000);
      expect(await h.finalizeStop(run.id, 3000)).toMatchObject({
        status: "stopped",
        reason: "stopped",
        summary: "stopped by request",
        finishedAt: 3000,
        epoch: claimed.run.epoch + 1,
      });
      // The attempt in flight was a gone worker's: abandoned, with the run's end as its outcome.
      expect(await h.listIterations(run.id)).toEqual([
        expect.objectContaining({
          n: 1,
          attempt: 1,
          status: "abandoned",
          outcome: "stopped",
          finishedAt: 3000,
        }),
      ]);
      // Its agent, which was what ran (no result recorded), gets its agent_finished first.
      expect((await h.listEvents(run.id, 0, 100)).slice(-2)).toMatchObject([
        {
          type: "agent_finished",
          data: { iteration: 1, exitCode: null, durationMs: 2000, abandoned: true },
        },
        {
          type: "run_finished",
          data: {
            status: "stopped",
            reason: "stopped",
            budget: { elapsedMs: 2000, reason: "stopped" },
          },
        },
      ]);
      // The earlier holder can write nothing more.
      await expect(
        h.store.commit(run.id, claimed.run.epoch, { run: { progress: "late" } }, 4000),
      ).rejects.toBeInstanceOf(LeaseLostError);
      // The session is free again.
      expect(await h.activeRunOf("s")).toBeNull();
      expect((await h.createRun(newRun({}, { sessionId: "s" }))).status).toBe("queued");
    });
  });

  recordsSuite(engine, () => h);
  engineOnStoreSuite(engine, () => h);
}
