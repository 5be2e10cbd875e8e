import type { PhaseArtifact } from "../domain/artifacts";
import type { IterationOutcome } from "../domain/run";
import type { RunChange } from "../domain/snapshots";
import { packageChange } from "../pipeline/packaging";
import { describeGates, type GateReport } from "../validation/gates";
import type { IterationResult } from "./iteration";
import type { EventSpec, RunContext } from "./run-context";
import type { MutationExtras, RunPatch } from "./run-store";
import { nextStalledCount } from "./stall-detector";

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
export function packagingWrites(ctx: RunContext, change: RunChange, now: number) {
  if (!ctx.run.spec.phases.includes("packaging")) return { events: [] as EventSpec[], writes: {} };
  const artifact: PhaseArtifact = {
    runId: ctx.run.id,
    phase: "packaging",
    content: packageChange(change),
    createdAt: now,
  };
  // Started and completed with the decision (it runs no agent): told as every phase is.
  const events: EventSpec[] = [
    ["phase_started", { phase: "packaging" }],
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

/** A success with failed validation commands (under `successThreshold`): the run's `partial`. */
export function partialWrites(gates: GateReport) {
  if (gates.failed.length === 0)
    return { summary: "", patch: { partial: null } satisfies RunPatch };
  const partial = { passed: gates.passed, total: gates.total, failed: gates.failed };
  return {
    summary: `; partial: ${describeGates(partial)}`,
    patch: { partial } satisfies RunPatch,
  };
}

/**
 * Counts an iteration that goes back for another try towards `maxStalledIterations`:
 * `stalled` when the run has now gone that many iterations in a row without progress.
 */
export function stallWrites(ctx: RunContext, result: DecidedResult, outcome: IterationOutcome) {
  const count = nextStalledCount(ctx.run.stalledIterations, {
    changed: result.changed,
    outcome,
    validation: result.validation,
    previous: ctx.lastDecided,
  });
  const max = ctx.run.spec.maxStalledIterations;
  return {
    stalled: count >= max,
    summary: `stalled: ${count} iteration${count === 1 ? "" : "s"} in a row changed nothing in the workspace and failed the same gates`,
    patch: { stalledIterations: count } satisfies RunPatch,
  };
}
