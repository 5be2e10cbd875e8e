import type { ReviewArtifact } from "../domain/artifacts";
import type { RunRecord } from "../domain/run";

/** How a run converged: what it took, and what its reviewers found and saw fixed. */
export interface Convergence {
  /** Iterations finished. */
  iterations: number;
  /** From `startedAt` to `finishedAt` (or now, while it runs); `null` before it started. */
  totalTimeMs: number | null;
  validationFailures: number;
  reviewBlockings: number;
  /** Blocking issues of a review that the next review no longer reports. */
  issuesFixedAutomatically: number;
  /** Blocking issues of the latest review. */
  issuesRemaining: number;
}

/** Issues are compared by their text, ignoring case and spacing. */
const key = (issue: string) => issue.trim().toLowerCase().replace(/\s+/g, " ");

/** Computes a run's convergence from its record and its reviews (any order). */
export function computeConvergence(
  run: RunRecord,
  reviews: readonly Pick<ReviewArtifact, "iteration" | "blockingIssues" | "createdAt">[],
  now: number,
): Convergence {
  const ordered = [...reviews].sort(
    (a, b) => a.iteration - b.iteration || a.createdAt - b.createdAt,
  );
  let fixed = 0;
  for (let i = 1; i < ordered.length; i++) {
    const later = new Set(ordered[i]!.blockingIssues.map(key));
    fixed += new Set(ordered[i - 1]!.blockingIssues.map(key).filter((k) => !later.has(k))).size;
  }
  return {
    iterations: run.metrics.iterations,
    totalTimeMs:
      run.startedAt === null ? null : Math.max(0, (run.finishedAt ?? now) - run.startedAt),
    validationFailures: run.metrics.validationFailures,
    reviewBlockings: run.metrics.reviewBlockings,
    issuesFixedAutomatically: fixed,
    issuesRemaining: ordered.at(-1)?.blockingIssues.length ?? 0,
  };
}
