import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LeaseLostError, runStep } from "@looprun/core";
import { describe, expect, it } from "vitest";
import { firstChange, review, secondChange, snapshotRow } from "./store-fixtures";
import { freshStoreForEachTest, newRun, resources } from "./support";

const fresh = freshStoreForEachTest();

describe("artifacts in SQLite", () => {
  it("stores reviews, snapshots, the run's change and phase artifacts with the epoch fence", async () => {
    const run = fresh.repo.createRun(newRun({}));
    const { epoch } = (await fresh.store.claimRun(run.id))!.run;
    await fresh.store.commit(
      run.id,
      epoch,
      {
        run: {
          baselineSnapshot: "base",
          latestSnapshot: "s1",
          latestReviewId: `review-${run.id}-1`,
        },
        insertReview: review(run.id, run.sessionId, 1, ["x"]),
        insertSnapshots: [snapshotRow(run.id, 5)],
        change: firstChange(run.id, 5),
        phaseArtifact: { runId: run.id, phase: "design", content: "the design", createdAt: 3 },
      },
      5,
    );
    // A rerun attempt's writes replace what an interrupted one left; the change is replaced too.
    await fresh.store.commit(
      run.id,
      epoch,
      {
        phaseArtifact: { runId: run.id, phase: "planning", content: "the plan", createdAt: 6 },
        change: secondChange(run.id, 7),
      },
      7,
    );

    expect(fresh.repo.getRun(run.id)).toMatchObject({
      baselineSnapshot: "base",
      latestSnapshot: "s1",
      latestReviewId: `review-${run.id}-1`,
    });
    expect(fresh.repo.listReviews(run.id)).toEqual([
      expect.objectContaining({
        iteration: 1,
        phase: "review",
        blockingIssues: ["x"],
        fixPlan: ["fix x"],
        score: 55.5,
      }),
    ]);
    expect(fresh.repo.artifacts.snapshots(run.id)).toEqual([
      {
        runId: run.id,
        n: 1,
        attempt: 1,
        snapshotId: "s1",
        parentId: "base",
        diffBytes: 19,
        diffTruncated: false,
        createdAt: 5,
      },
    ]);
    expect(fresh.repo.artifacts.iterationSnapshot(run.id, 1)?.diff).toBe("diff --git a/f b/f\n");
    expect(fresh.repo.artifacts.iterationSnapshot(run.id, 2)).toBeNull();
    expect(fresh.repo.artifacts.change(run.id)).toMatchObject({
      headSnapshot: "s2",
      files: ["f", "g"],
      patch: null,
      iteration: 2,
    });
    // In phase order, whatever the order they were written in.
    expect((await fresh.store.phaseArtifacts(run.id)).map((a) => a.phase)).toEqual([
      "planning",
      "design",
    ]);
    expect(fresh.repo.artifacts.phases(run.id).map((a) => a.content)).toEqual([
      "the plan",
      "the design",
    ]);

    await fresh.store.claimRun(run.id);
    await expect(
      fresh.store.commit(run.id, epoch, { insertReview: review(run.id, run.sessionId, 2, []) }, 8),
    ).rejects.toBeInstanceOf(LeaseLostError);
    expect(fresh.repo.listReviews(run.id)).toHaveLength(1);
  });

  it("runs a reviewed loop on SQLite: two reviews, snapshot diffs, the patch", async () => {
    const ws = join(fresh.dir, "ws");
    mkdirSync(ws);
    writeFileSync(join(ws, "count.txt"), "0\n");
    const reviewer =
      'if grep -q 2 count.txt; then echo \'{"blockingIssues":[],"nonBlockingIssues":[],"score":90,"fixPlan":[]}\'; ' +
      'else echo \'{"blockingIssues":["count must reach 2"],"nonBlockingIssues":[],"score":10,"fixPlan":["increment count.txt"]}\'; fi';
    const run = fresh.repo.createRun(
      newRun(
        {
          agent: { type: "command", command: "echo $(( $(cat count.txt) + 1 )) > count.txt" },
          review: { type: "command", command: reviewer },
          phases: ["packaging"],
          cooldownMs: 0,
        },
        { workspace: ws },
      ),
    );
    expect(await runStep(resources(fresh.store), run.id)).toMatchObject({ status: "succeeded" });

    const final = fresh.repo.getRun(run.id)!;
    const reviews = fresh.repo.listReviews(run.id);
    expect(reviews.map((r) => [r.iteration, r.blockingIssues])).toEqual([
      [1, ["count must reach 2"]],
      [2, []],
    ]);
    expect(final.latestReviewId).toBe(reviews[1]?.id);
    expect(fresh.repo.listIterations(run.id).map((i) => [i.outcome, i.reviewId])).toEqual([
      ["review_blocking", reviews[0]?.id],
      ["complete", reviews[1]?.id],
    ]);
    expect(fresh.repo.artifacts.iterationSnapshot(run.id, 2)?.diff).toContain("-1\n+2\n");
    const change = fresh.repo.artifacts.change(run.id)!;
    expect(change).toMatchObject({
      baselineSnapshot: final.baselineSnapshot,
      headSnapshot: final.latestSnapshot,
      files: ["count.txt"],
    });
    const original = join(fresh.dir, "original");
    mkdirSync(original);
    writeFileSync(join(original, "count.txt"), "0\n");
    writeFileSync(join(fresh.dir, "p.patch"), change.patch!);
    execFileSync("git", ["apply", join(fresh.dir, "p.patch")], { cwd: original });
    expect(execFileSync("cat", ["count.txt"], { cwd: original, encoding: "utf8" })).toBe("2\n");
    expect(fresh.repo.artifacts.phases(run.id).map((a) => a.phase)).toEqual(["packaging"]);
  });
});
