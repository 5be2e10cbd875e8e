import { LeaseLostError, type Plan, type ReviewArtifact } from "@looprun/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { claimSuite } from "./claim-suite";
import { engineOnStoreSuite } from "./engine-on-store-suite";
import { event, iteration } from "./store-fixtures";
import type { StoreHarness } from "./store-harness";
import { newRun } from "./support";

const review = (
  runId: string,
  sessionId: string,
  iteration: number,
  blocking: string[],
): ReviewArtifact => ({
  id: `review-${runId}-${iteration}`,
  runId,
  sessionId,
  phase: "review",
  iteration,
  blockingIssues: blocking,
  nonBlockingIssues: ["nit"],
  score: 55.5,
  fixPlan: blocking.map((b) => `fix ${b}`),
  createdAt: 1000 + iteration,
});

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

    it("records an iteration (run, n, attempt) once; a duplicate rolls the whole write back", async () => {
      const run = await h.createRun(newRun({}));
      const { epoch } = (await h.store.claimRun(run.id))!.run;
      await h.store.commit(run.id, epoch, { insertIteration: iteration(run.id, 1, 1) }, 1);
      await expect(
        h.store.commit(
          run.id,
          epoch,
          {
            run: { progress: "dup" },
            insertIteration: iteration(run.id, 1, 1),
            events: [event("iteration_started")],
          },
          2,
        ),
      ).rejects.toSatisfy((e) => h.isUniqueViolation(e));
      expect((await h.getRun(run.id))?.progress).toBe("queued");
      expect((await h.listEvents(run.id, 0, 100)).map((e) => e.type)).toEqual(["run_queued"]);
      // Another attempt of the same n is a different record.
      await h.store.commit(run.id, epoch, { insertIteration: iteration(run.id, 1, 2) }, 3);
      expect((await h.listIterations(run.id)).map((i) => [i.n, i.attempt])).toEqual([
        [1, 1],
        [1, 2],
      ]);
    });

    it("numbers tool calls per run and serves the failures and the session's history", async () => {
      const first = await h.createRun(newRun({}, { sessionId: "history" }));
      const e1 = (await h.store.claimRun(first.id))!.run.epoch;
      const call = (tool: string, path: string, isError: boolean) => ({
        iteration: 1,
        server: "workspace",
        tool,
        args: { path },
        isError,
        result: isError ? `cannot write ${path}` : "ok",
        durationMs: 3,
      });
      await h.store.commit(
        first.id,
        e1,
        {
          toolCalls: [
            call("write_file", "a.ts", false),
            call("read_text_file", "r.ts", false),
            call("edit_file", "b.ts", true),
          ],
        },
        10,
      );
      await h.store.commit(
        first.id,
        e1,
        {
          toolCalls: [call("edit_file", "a.ts", false), call("write_file", "c.ts", true)],
          run: { status: "failed", reason: "max_iterations", summary: "gave up" },
        },
        11,
      );
      expect((await h.listToolCalls(first.id)).map((c) => [c.seq, c.tool, c.isError])).toEqual([
        [1, "write_file", false],
        [2, "read_text_file", false],
        [3, "edit_file", true],
        [4, "edit_file", false],
        [5, "write_file", true],
      ]);
      expect(await h.store.toolFailures(first.id, 1)).toEqual([
        {
          iteration: 1,
          server: "workspace",
          tool: "write_file",
          args: { path: "c.ts" },
          error: "cannot write c.ts",
        },
      ]);
      expect((await h.store.toolFailures(first.id, 10)).map((f) => f.tool)).toEqual([
        "edit_file",
        "write_file",
      ]);

      const second = await h.createRun(newRun({}, { sessionId: "history" }));
      expect(await h.store.sessionHistory("history", second.id, 5)).toEqual([
        {
          runId: first.id,
          task: first.spec.task,
          status: "failed",
          reason: "max_iterations",
          summary: "gave up",
          filesTouched: ["a.ts"],
        },
      ]);
      expect(await h.store.sessionHistory("history", first.id, 5)).toEqual([]);
    });

    it("stores reviews, snapshots, the run's change and phase artifacts with the epoch fence", async () => {
      const run = await h.createRun(newRun({}));
      const { epoch } = (await h.store.claimRun(run.id))!.run;
      const snapshot = {
        runId: run.id,
        n: 1,
        attempt: 1,
        snapshotId: "s1",
        parentId: "base",
        diff: "diff --git a/f b/f\n",
        diffBytes: 19,
        diffTruncated: false,
        createdAt: 5,
      };
      await h.store.commit(
        run.id,
        epoch,
        {
          run: { baselineSnapshot: "base", latestSnapshot: "s1", latestReviewId: "r" },
          insertReview: review(run.id, run.sessionId, 1, ["x"]),
          insertSnapshots: [snapshot],
          change: {
            runId: run.id,
            baselineSnapshot: "base",
            headSnapshot: "s1",
            iteration: 1,
            files: ["f"],
            stat: " f | 1 +\n",
            patch: "diff --git a/f b/f\n",
            patchBytes: 19,
            updatedAt: 5,
          },
          phaseArtifact: { runId: run.id, phase: "design", content: "the design", createdAt: 3 },
        },
        5,
      );
      // A rerun attempt's writes replace what an interrupted one left; the change is replaced too.
      await h.store.commit(
        run.id,
        epoch,
        {
          insertSnapshots: [{ ...snapshot, snapshotId: "s1b", diffTruncated: true }],
          phaseArtifact: { runId: run.id, phase: "planning", content: "the plan", createdAt: 6 },
          change: {
            runId: run.id,
            baselineSnapshot: "base",
            headSnapshot: "s2",
            iteration: 2,
            files: ["f", "g"],
            stat: "",
            patch: null,
            patchBytes: 99_999_999_999,
            updatedAt: 7,
          },
        },
        7,
      );
      // What a resumed run asks before it writes a dead worker's rows again (backfillSnapshot).
      expect(await h.store.hasSnapshot(run.id, 1, 1)).toBe(true);
      expect(await h.store.hasSnapshot(run.id, 1, 2)).toBe(false);
      expect(await h.store.hasSnapshot(run.id, 2, 1)).toBe(false);
      expect(await h.listReviews(run.id)).toEqual([
        expect.objectContaining({
          iteration: 1,
          phase: "review",
          blockingIssues: ["x"],
          nonBlockingIssues: ["nit"],
          fixPlan: ["fix x"],
          score: 55.5,
        }),
      ]);
      expect(await h.snapshots(run.id)).toEqual([
        { ...snapshot, snapshotId: "s1b", diffTruncated: true },
      ]);
      expect(await h.change(run.id)).toMatchObject({
        headSnapshot: "s2",
        files: ["f", "g"],
        patch: null,
        patchBytes: 99_999_999_999,
        iteration: 2,
      });
      // In phase order, whatever the order they were written in.
      expect((await h.store.phaseArtifacts(run.id)).map((a) => a.phase)).toEqual([
        "planning",
        "design",
      ]);

      await h.store.claimRun(run.id);
      await expect(
        h.store.commit(run.id, epoch, { insertReview: review(run.id, run.sessionId, 2, []) }, 8),
      ).rejects.toBeInstanceOf(LeaseLostError);
      expect(await h.listReviews(run.id)).toHaveLength(1);
    });
  });

  engineOnStoreSuite(engine, () => h);
}
