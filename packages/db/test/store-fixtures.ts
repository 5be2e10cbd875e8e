import type { IterationRecord, NewEvent, ReviewArtifact } from "@looprun/core";

const budget = { elapsedMs: 0, remainingIterations: 6 };
/** An event as the engine hands it to a store. */
export const event = (type: NewEvent["type"]): NewEvent => ({ type, data: { budget } });

/** An iteration record of a run (running, unless `patch` says otherwise). */
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

/** A review of iteration `iteration` with these blocking issues (and one nit). */
export const review = (
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
