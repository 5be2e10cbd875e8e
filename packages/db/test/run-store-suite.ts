import { existsSync } from "node:fs";
import { join } from "node:path";
import {
  type ClaimStart,
  type IterationRecord,
  LeaseLostError,
  type NewEvent,
  type Plan,
  type ReviewArtifact,
  runStep,
} from "@looprun/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { StoreHarness } from "./store-harness";
import { isAlive, newRun, readPids, removeDir, resources, tempDir, waitFor } from "./support";

const budget = { elapsedMs: 0, remainingIterations: 6 };
const event = (type: NewEvent["type"]): NewEvent => ({ type, data: { budget } });

export function iteration(
  runId: string,
  n: number,
  attempt: number,
  patch: Partial<IterationRecord> = {},
): IterationRecord {
  return {
    runId,
    n,
    attempt,
    status: "running",
    outcome: null,
    prompt: `prompt ${n}/${attempt}`,
    agent: null,
    validation: [],
    reviewId: null,
    feedback: null,
    startedAt: 1000,
    finishedAt: null,
    ...patch,
  };
}

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

/** Creates a, b, c — one per iteration. */
const FIXER = "for f in a b c; do if [ ! -f $f ]; then touch $f; echo fixed $f; break; fi; done";
const CHECK =
  'missing=""; for f in a b c; do [ -f $f ] || missing="$missing $f"; done; ' +
  'if [ -n "$missing" ]; then echo "CHECK-FAILED missing:$missing"; exit 1; fi';

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

  describe(`${engine}: claimRun`, () => {
    it("increments the epoch on every claim", async () => {
      const run = await h.createRun(newRun({}));
      expect((await h.store.claimRun(run.id))?.run.epoch).toBe(1);
      expect((await h.store.claimRun(run.id))?.run.epoch).toBe(2);
      expect((await h.getRun(run.id))?.epoch).toBe(2);
    });

    it("returns a finished run unchanged and a missing one as null", async () => {
      const run = await h.createRun(newRun({}));
      const claimed = (await h.store.claimRun(run.id))!;
      await h.store.commit(
        run.id,
        claimed.run.epoch,
        { run: { status: "succeeded", reason: "success" } },
        1,
      );
      expect((await h.store.claimRun(run.id))?.run).toMatchObject({
        status: "succeeded",
        epoch: claimed.run.epoch,
      });
      expect(await h.store.claimRun("nope")).toBeNull();
    });

    it("returns the latest iteration and the latest decided one", async () => {
      const run = await h.createRun(newRun({}));
      const { epoch } = (await h.store.claimRun(run.id))!.run;
      expect(await h.store.claimRun(run.id)).toMatchObject({
        lastIteration: null,
        lastDecided: null,
      });
      const { epoch: e2 } = (await h.store.claimRun(run.id))!.run;
      await h.store.commit(
        run.id,
        e2,
        { insertIteration: iteration(run.id, 1, 1, { status: "failed", feedback: "fix x" }) },
        1,
      );
      await h.store.commit(
        run.id,
        e2,
        { insertIteration: iteration(run.id, 2, 1, { status: "abandoned" }) },
        1,
      );
      await h.store.commit(run.id, e2, { insertIteration: iteration(run.id, 2, 2) }, 1);
      const claimed = (await h.store.claimRun(run.id))!;
      expect(claimed.run.epoch).toBe(epoch + 3);
      expect(claimed.lastIteration).toMatchObject({ n: 2, attempt: 2, status: "running" });
      expect(claimed.lastDecided).toMatchObject({
        n: 1,
        attempt: 1,
        status: "failed",
        feedback: "fix x",
      });
    });
    it("starts a queued run in its claim, and only a run never started", async () => {
      const run = await h.createRun(newRun({}));
      const asked: number[] = [];
      const start: ClaimStart = {
        now: 5000,
        mutation: (claimed) => {
          asked.push(claimed.epoch);
          return {
            run: { status: "running", startedAt: 5000, progress: "started" },
            events: [event("run_started")],
          };
        },
      };
      const claimed = (await h.store.claimRun(run.id, start))!;
      // The mutation saw the run at its new epoch, and the claim returns the run it wrote.
      expect(asked).toEqual([1]);
      expect(claimed.run).toMatchObject({ epoch: 1, status: "running", startedAt: 5000 });
      expect(await h.getRun(run.id)).toMatchObject({ epoch: 1, status: "running" });
      // (The API's harness may have written run_queued before.)
      const started = async () =>
        (await h.listEvents(run.id, 0, 10)).filter((e) => e.type !== "run_queued");
      expect((await started()).map((e) => [e.type, e.at])).toEqual([["run_started", 5000]]);
      // Claimed again (a resumed step): started already, so nothing more is written.
      expect((await h.store.claimRun(run.id, start))?.run).toMatchObject({
        epoch: 2,
        startedAt: 5000,
      });
      expect(asked).toEqual([1]);
      expect(await started()).toHaveLength(1);
    });

    it("does not start a run in its claim once it was started, or while it is stopping", async () => {
      const start: ClaimStart = {
        now: 5000,
        mutation: () => {
          throw new Error("must not be asked");
        },
      };
      // Queued again after a pause for a person: it was started before.
      const paused = await h.createRun(newRun({}));
      const e1 = (await h.store.claimRun(paused.id))!.run.epoch;
      await h.store.commit(paused.id, e1, { run: { status: "queued", startedAt: 10 } }, 10);
      expect((await h.store.claimRun(paused.id, start))?.run).toMatchObject({ status: "queued" });
      // Stopped while queued: the engine ends it without starting it.
      const stopping = await h.createRun(newRun({}));
      await h.requestStop(stopping.id, 20);
      expect((await h.store.claimRun(stopping.id, start))?.run.status).toBe("stopping");
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
        10,
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
        [2, "run_started", 10],
        [3, "iteration_started", 10],
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
        { iteration: 1, tool: "write_file", args: { path: "c.ts" }, error: "cannot write c.ts" },
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
          insertSnapshot: snapshot,
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
          insertSnapshot: { ...snapshot, snapshotId: "s1b", diffTruncated: true },
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

  describe(`${engine}: the engine on this store`, () => {
    let ws: string;
    beforeEach(async () => {
      ws = await tempDir("looprun-ws-");
    });
    afterEach(async () => {
      await removeDir(ws);
    });

    it("writes the snapshot rows of an iteration whose worker died before writing them", async () => {
      const run = await h.createRun(
        newRun(
          { agent: { type: "command", command: FIXER }, testCommand: CHECK, cooldownMs: 0 },
          { workspace: ws },
        ),
      );
      // The first worker's write of iteration 1's snapshot rows (deferred: cooldown 0) never
      // lands, nor anything after it: it died there.
      let dead = false;
      const dying = new Proxy(h.store, {
        get(store, key) {
          if (key === "commit") {
            return (...args: Parameters<typeof store.commit>) => {
              if (dead || args[2].insertSnapshot?.n === 1) {
                dead = true;
                return new Promise(() => {});
              }
              return store.commit(...args);
            };
          }
          const value = Reflect.get(store, key, store);
          return typeof value === "function" ? value.bind(store) : value;
        },
      });
      void runStep(resources(dying), run.id);
      await waitFor(() => dead, "the first worker died");
      expect(await h.snapshots(run.id)).toEqual([]);

      expect(await runStep(resources(h.store), run.id)).toMatchObject({ status: "succeeded" });
      const snapshots = await h.snapshots(run.id);
      const first = snapshots.find((s) => s.n === 1);
      expect(first).toMatchObject({ attempt: 1 });
      expect(first?.diff).toContain("b/a");
      expect(first?.parentId).toBe((await h.getRun(run.id))?.baselineSnapshot);
    });

    it("converges in three iterations", async () => {
      const run = await h.createRun(
        newRun(
          { agent: { type: "command", command: FIXER }, testCommand: CHECK, cooldownMs: 10 },
          { workspace: ws },
        ),
      );
      const res = resources(h.store);
      expect((await runStep(res, run.id)).kind).toBe("cooldown");
      expect((await runStep(res, run.id)).kind).toBe("cooldown");
      expect(await runStep(res, run.id)).toEqual({
        kind: "finished",
        status: "succeeded",
        reason: "success",
      });

      const final = (await h.getRun(run.id))!;
      expect(final).toMatchObject({
        status: "succeeded",
        reason: "success",
        summary: "succeeded after 3 iterations",
        iteration: 3,
        epoch: 3,
      });
      expect(final.metrics).toMatchObject({ iterations: 3, validationFailures: 2 });

      const its = await h.listIterations(run.id);
      expect(its.map((i) => [i.n, i.attempt, i.status, i.outcome])).toEqual([
        [1, 1, "failed", "validation_failed"],
        [2, 1, "failed", "validation_failed"],
        [3, 1, "passed", "complete"],
      ]);
      expect(its[0]?.validation[0]).toMatchObject({
        command: CHECK,
        exitCode: 1,
        output: "CHECK-FAILED missing: b c\n",
      });
      expect(its[1]?.prompt).toContain("CHECK-FAILED missing: b c");
      expect(its[2]?.prompt).toContain("CHECK-FAILED missing: c");

      const events = await h.listEvents(run.id, 0, 1000);
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
      const step = (last: string) => ["iteration_started", "agent_started", "agent_finished", last];
      expect(events.map((e) => e.type)).toEqual([
        "run_queued",
        "run_started",
        ...step("validation_failed"),
        "cooldown_started",
        ...step("validation_failed"),
        "cooldown_started",
        ...step("validation_passed"),
        "run_finished",
      ]);
      for (const e of events) {
        expect(e.data.budget).toEqual(
          expect.objectContaining({
            elapsedMs: expect.any(Number),
            remainingIterations: expect.any(Number),
          }),
        );
      }
      expect(await h.activeRunOf(run.sessionId)).toBeNull();
    });

    it("stops a running iteration on requestStop, killing its processes", async () => {
      const run = await h.createRun(
        newRun(
          {
            agent: {
              type: "command",
              command: "echo $$ > agent.pids; sleep 30 & echo $! >> agent.pids; wait",
            },
            testCommand: "true",
          },
          { workspace: ws },
        ),
      );
      const pending = runStep(resources(h.store), run.id);
      const pidFile = join(ws, "agent.pids");
      await waitFor(
        () => existsSync(pidFile) && readPids(pidFile).length === 2,
        "the agent to start",
      );
      expect(await h.requestStop(run.id, Date.now())).toMatchObject({ kind: "stopping" });
      expect(await pending).toEqual({ kind: "finished", status: "stopped", reason: "stopped" });
      for (const pid of readPids(pidFile)) expect(isAlive(pid)).toBe(false);
      expect(await h.getRun(run.id)).toMatchObject({ status: "stopped", reason: "stopped" });
      expect(await h.listIterations(run.id)).toEqual([
        expect.objectContaining({ status: "failed", outcome: "stopped" }),
      ]);
      expect((await h.listEvents(run.id, 0, 1000)).map((e) => e.type)).toEqual([
        "run_queued",
        "run_started",
        "iteration_started",
        "agent_started",
        "stop_requested",
        "run_finished",
      ]);
    });

    it("ends a run that was stopped while queued without running anything", async () => {
      const run = await h.createRun(newRun({}, { workspace: ws }));
      await h.requestStop(run.id, Date.now());
      expect(await runStep(resources(h.store), run.id)).toEqual({
        kind: "finished",
        status: "stopped",
        reason: "stopped",
      });
      expect(await h.listIterations(run.id)).toEqual([]);
      expect((await h.listEvents(run.id, 0, 100)).map((e) => e.type)).toEqual([
        "run_queued",
        "stop_requested",
        "run_finished",
      ]);
    });
  });
}
