import { LeaseLostError } from "@looprun/core";
import { beforeEach, describe, expect, it } from "vitest";
import { event, firstChange, iteration, review, secondChange, snapshotRow } from "./store-fixtures";
import type { StoreHarness } from "./store-harness";
import { newRun } from "./support";

/**
 * What a run's steps record beside the run itself (iterations, tool calls, reviews, snapshots,
 * phase artifacts), fenced by the epoch: part of the store suite.
 */
export function recordsSuite(engine: string, harness: () => StoreHarness): void {
  let h: StoreHarness;
  beforeEach(() => {
    h = harness();
  });

  describe(`${engine}: records`, () => {
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
      const snapshot = snapshotRow(run.id, 5);
      await h.store.commit(
        run.id,
        epoch,
        {
          run: { baselineSnapshot: "base", latestSnapshot: "s1", latestReviewId: "r" },
          insertReview: review(run.id, run.sessionId, 1, ["x"]),
          insertSnapshots: [snapshot],
          change: firstChange(run.id, 5),
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
          change: secondChange(run.id, 7),
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
}
