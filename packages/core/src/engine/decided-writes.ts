import type { PhaseArtifact } from "../domain/artifacts";
import { packageChange } from "../pipeline/packaging";
import type { IterationResult } from "./iteration";
import type { EventSpec, RunContext } from "./run-context";
import type { MutationExtras, RunPatch } from "./run-store";

type DecidedResult = Extract<IterationResult, { kind: "decided" }>;

/** What a review adds to the iteration's write: the artifact, the run's pointer, its event. */
export function reviewWrites(n: number, review: DecidedResult["review"]) {
  if (review === null) return { blocking: false, events: [] as EventSpec[], writes: {}, patch: {} };
  const { artifact, notes } = review;
  const blocking = artifact.blockingIssues.length > 0;
  const data = {
    iteration: n,
    reviewId: artifact.id,
    blockingIssues: artifact.blockingIssues.length,
    nonBlockingIssues: artifact.nonBlockingIssues.length,
    score: artifact.score,
    ...(blocking ? { fixPlan: artifact.fixPlan } : {}),
    ...(notes ? { reading: notes.slice(0, 2000) } : {}),
  };
  const events: EventSpec[] = [[blocking ? "review_blocking_detected" : "review_approved", data]];
  const writes: MutationExtras = { insertReview: artifact };
  return { blocking, events, writes, patch: { latestReviewId: artifact.id } satisfies RunPatch };
}

/** The packaging phase (when the run lists it): the change summary, stored after success. */
export function packagingWrites(ctx: RunContext, change: DecidedResult["change"], now: number) {
  if (!ctx.run.spec.phases.includes("packaging")) return { events: [] as EventSpec[], writes: {} };
  const artifact: PhaseArtifact = {
    runId: ctx.run.id,
    phase: "packaging",
    content: packageChange(change),
    createdAt: now,
  };
  const events: EventSpec[] = [
    [
      "phase_completed",
      {
        phase: "packaging",
        filesChanged: change.files.length,
        patchBytes: change.patchBytes,
        headSnapshot: change.headSnapshot,
      },
    ],
  ];
  return { events, writes: { phaseArtifact: artifact } satisfies MutationExtras };
}
