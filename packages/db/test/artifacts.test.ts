import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LeaseLostError, runStep } from "@looprun/core";
import { type Database, RunRepository, SqliteRunStore } from "@looprun/db";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { firstChange, review, secondChange, snapshotRow } from "./store-fixtures";
import { freshDatabase, newRun, removeDir, resources } from "./support";

let dir: string;
let database: Database;
let repo: RunRepository;
let store: SqliteRunStore;
beforeEach(async () => {
  ({ dir, database } = await freshDatabase());
  repo = new RunRepository(database.db);
  store = new SqliteRunStore(database.db);
});
afterEach(async () => {
  database.close();
  await removeDir(dir);
});

describe("artifacts in SQLite", () => {
  it("stores reviews, snapshots, the run's change and phase artifacts with the epoch fence", async () => {
    const run = repo.createRun(newRun({}));
    const { epoch } = (await store.claimRun(run.id))!.run;
    await store.commit(
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
    await store.commit(
      run.id,
      epoch,
      {
        phaseArtifact: { runId: run.id, phase: "planning", content: "the plan", createdAt: 6 },
        change: secondChange(run.id, 7),
      },
      7,
    );

    expect(repo.getRun(run.id)).toMatchObject({
      baselineSnapshot: "base",
      latestSnapshot: "s1",
      latestReviewId: `review-${run.id}-1`,
    });
    expect(repo.listReviews(run.id)).toEqual([
      expect.objectContaining({
        iteration: 1,
        phase: "review",
        blockingIssues: ["x"],
        fixPlan: ["fix x"],
        score: 55.5,
      }),
    ]);
    expect(repo.artifacts.snapshots(run.id)).toEqual([
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
    expect(repo.artifacts.iterationSnapshot(run.id, 1)?.diff).toBe("diff --git a/f b/f\n");
    expect(repo.artifacts.iterationSnapshot(run.id, 2)).toBeNull();
    expect(repo.artifacts.change(run.id)).toMatchObject({
      headSnapshot: "s2",
      files: ["f", "g"],
      patch: null,
      iteration: 2,
    });
    // In phase order, whatever the order they were written in.
    expect((await store.phaseArtifacts(run.id)).map((a) => a.phase)).toEqual([
      "planning",
      "design",
    ]);
    expect(repo.artifacts.phases(run.id).map((a) => a.content)).toEqual(["the plan", "the design"]);

    await store.claimRun(run.id);
    await expect(
      store.commit(run.id, epoch, { insertReview: review(run.id, run.sessionId, 2, []) }, 8),
    ).rejects.toBeInstanceOf(LeaseLostError);
    expect(repo.listReviews(run.id)).toHaveLength(1);
  });

  it("runs a reviewed loop on SQLite: two reviews, snapshot diffs, the patch", async () => {
    const ws = join(dir, "ws");
    mkdirSync(ws);
    writeFileSync(join(ws, "count.txt"), "0\n");
    const reviewer =
      'if grep -q 2 count.txt; then echo \'{"blockingIssues":[],"nonBlockingIssues":[],"score":90,"fixPlan":[]}\'; ' +
      'else echo \'{"blockingIssues":["count must reach 2"],"nonBlockingIssues":[],"score":10,"fixPlan":["increment count.txt"]}\'; fi';
    const run = repo.createRun(
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
    expect(await runStep(resources(store), run.id)).toMatchObject({ status: "succeeded" });

    const final = repo.getRun(run.id)!;
    const reviews = repo.listReviews(run.id);
    expect(reviews.map((r) => [r.iteration, r.blockingIssues])).toEqual([
      [1, ["count must reach 2"]],
      [2, []],
    ]);
    expect(final.latestReviewId).toBe(reviews[1]?.id);
    expect(repo.listIterations(run.id).map((i) => [i.outcome, i.reviewId])).toEqual([
      ["review_blocking", reviews[0]?.id],
      ["complete", reviews[1]?.id],
    ]);
    expect(repo.artifacts.iterationSnapshot(run.id, 2)?.diff).toContain("-1\n+2\n");
    const change = repo.artifacts.change(run.id)!;
    expect(change).toMatchObject({
      baselineSnapshot: final.baselineSnapshot,
      headSnapshot: final.latestSnapshot,
      files: ["count.txt"],
    });
    const original = join(dir, "original");
    mkdirSync(original);
    writeFileSync(join(original, "count.txt"), "0\n");
    writeFileSync(join(dir, "p.patch"), change.patch!);
    execFileSync("git", ["apply", join(dir, "p.patch")], { cwd: original });
    expect(execFileSync("cat", ["count.txt"], { cwd: original, encoding: "utf8" })).toBe("2\n");
    expect(repo.artifacts.phases(run.id).map((a) => a.phase)).toEqual(["packaging"]);
  });
});
