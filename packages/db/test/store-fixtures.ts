import type {
  IterationRecord,
  IterationSnapshot,
  NewEvent,
  ReviewArtifact,
  RunChange,
} from "@looprun/core";

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

/** Iteration 1's snapshot row: `s1` on top of `base`, one file changed, taken at `at`. */
export const snapshotRow = (runId: string, at: number): IterationSnapshot => ({
  runId,
  n: 1,
  attempt: 1,
  snapshotId: "s1",
  parentId: "base",
  diff: "diff --git a/f b/f\n",
  diffBytes: 19,
  diffTruncated: false,
  createdAt: at,
});

/** The run's change up to that snapshot (`base` → `s1`), written at `at`. */
export const firstChange = (runId: string, at: number): RunChange => ({
  runId,
  baselineSnapshot: "base",
  headSnapshot: "s1",
  iteration: 1,
  files: ["f"],
  stat: " f | 1 +\n",
  patch: "diff --git a/f b/f\n",
  patchBytes: 19,
  updatedAt: at,
});

/** The change replaced after iteration 2 (`base` → `s2`): its patch too large to keep. */
export const secondChange = (runId: string, at: number): RunChange => ({
  runId,
  baselineSnapshot: "base",
  headSnapshot: "s2",
  iteration: 2,
  files: ["f", "g"],
  stat: "",
  patch: null,
  patchBytes: 99_999_999_999,
  updatedAt: at,
});
