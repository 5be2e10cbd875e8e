import { computeConvergence } from "@looprun/core";
import { describe, expect, it } from "vitest";
import { makeRun } from "./support";

const review = (iteration: number, blockingIssues: string[]) => ({
  iteration,
  blockingIssues,
  createdAt: iteration * 1000,
});

describe("computeConvergence", () => {
  it("counts the blocking issues a later review no longer reports as fixed, and the latest review's as remaining", () => {
    const run = {
      ...makeRun({ testCommand: "true" }, "/tmp/ws"),
      startedAt: 10_000,
      finishedAt: 70_000,
      metrics: {
        iterations: 4,
        validationFailures: 1,
        reviewBlockings: 2,
        toolCalls: 0,
        toolFailures: 0,
        tokens: 0,
      },
    };
    // Given out of order: iteration 1 blocks A and B; 3 fixed A (B stays, C is new); 4 fixed B and C.
    const reviews = [
      review(4, []),
      review(1, ["A is missing", "B is wrong"]),
      review(3, ["b  IS wrong", "C leaks"]),
    ];
    expect(computeConvergence(run, reviews, 99_000)).toEqual({
      iterations: 4,
      totalTimeMs: 60_000,
      validationFailures: 1,
      reviewBlockings: 2,
      issuesFixedAutomatically: 3,
      issuesRemaining: 0,
    });
  });

  it("reports what remains blocking while a run is still running, timed up to now", () => {
    const run = {
      ...makeRun({ testCommand: "true" }, "/tmp/ws"),
      startedAt: 1_000,
      finishedAt: null,
    };
    expect(computeConvergence(run, [review(1, ["A", "B"]), review(2, ["B"])], 5_000)).toMatchObject(
      {
        totalTimeMs: 4_000,
        issuesFixedAutomatically: 1,
        issuesRemaining: 1,
      },
    );
    const queued = makeRun({ testCommand: "true" }, "/tmp/ws");
    expect(computeConvergence(queued, [], 5_000)).toMatchObject({
      totalTimeMs: null,
      issuesFixedAutomatically: 0,
      issuesRemaining: 0,
    });
  });
});
