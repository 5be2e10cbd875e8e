import {
  budgetView,
  type EventRecord,
  type IterationRecord,
  isWaiting,
  type PhaseArtifact,
  type RunRecord,
} from "@looprun/core";
import type { ReviewArtifactRow, SnapshotRef, ToolCallRow } from "@looprun/db";
import { isoTime } from "./iso-time";

const iso = (ms: number | null) => (ms === null ? null : isoTime(ms));

/** A run as the API shows it. */
export function presentRun(run: RunRecord, now: number) {
  const { spec } = run;
  const budget = budgetView(run, now);
  return {
    id: run.id,
    sessionId: run.sessionId,
    task: spec.task,
    requirements: spec.requirements,
    filePaths: spec.filePaths,
    workspace: run.workspace,
    // As submitted; validationCommands lists every command validation runs, the test first.
    testCommand: spec.testCommand ?? null,
    validationCommands: spec.validationCommands,
    validationTimeoutMs: spec.validationTimeoutMs,
    completionPromise: spec.completionPromise,
    agent: spec.agent,
    // As submitted: `${NAME}` references, never a value (a secret written out is refused).
    mcpServers: spec.mcpServers,
    review: spec.review,
    phases: spec.phases,
    cooldownMs: spec.cooldownMs,
    maxTokens: spec.maxTokens,
    status: run.status,
    reason: run.reason,
    summary: run.summary,
    successThreshold: spec.successThreshold,
    maxStalledIterations: spec.maxStalledIterations,
    rollbackOnFailure: spec.rollbackOnFailure,
    approvalMode: spec.approval,
    approval: presentApproval(run),
    partial: run.partial !== null,
    gates: run.partial,
    iteration: run.iteration,
    budget: { ...budget, deadlineAt: iso(budget.deadlineAt) },
    progress: run.progress,
    metrics: run.metrics,
    latestReviewId: run.latestReviewId,
    snapshots: { baseline: run.baselineSnapshot, latest: run.latestSnapshot },
    createdAt: iso(run.createdAt),
    startedAt: iso(run.startedAt),
    finishedAt: iso(run.finishedAt),
  };
}

/** What the run waits for a person to approve or answer; null when it does not wait. */
function presentApproval(run: RunRecord) {
  const a = run.approval;
  if (!isWaiting(a)) return null;
  return {
    kind: a.kind,
    iteration: a.iteration,
    question: a.question,
    plan: a.plan,
    requestedAt: new Date(a.requestedAt).toISOString(),
  };
}

/** An iteration; `snapshot` is its attempt's workspace snapshot, when one was taken. */
export function presentIteration(it: IterationRecord, snapshot?: SnapshotRef) {
  return {
    n: it.n,
    attempt: it.attempt,
    status: it.status,
    outcome: it.outcome,
    prompt: it.prompt,
    agent: it.agent,
    validation: it.validation,
    reviewId: it.reviewId,
    snapshot: snapshot
      ? {
          id: snapshot.snapshotId,
          parentId: snapshot.parentId,
          diffBytes: snapshot.diffBytes,
          diffTruncated: snapshot.diffTruncated,
        }
      : null,
    feedback: it.feedback,
    startedAt: iso(it.startedAt),
    finishedAt: iso(it.finishedAt),
  };
}

/**
 * An event as the API shows it. Its data carries the budget snapshot twice: as `budget` (as
 * stored) and its figures spread into `data` itself (`elapsedMs`, `remainingIterations`), so
 * that either reading of "every event's data carries the budget snapshot" finds them. The
 * snapshot's `reason` is not spread: the events that have one (`budget_exhausted`,
 * `run_finished`) carry the same `reason` of their own, and others (`approval_rejected`,
 * `plan_updated`) have a `reason` that means something else.
 */
export function presentEvent(e: EventRecord) {
  const { elapsedMs, remainingIterations } = e.data.budget;
  return {
    seq: e.seq,
    type: e.type,
    at: iso(e.at),
    data: { elapsedMs, remainingIterations, ...e.data },
  };
}

export function presentToolCall(t: ToolCallRow) {
  return {
    iteration: t.iteration,
    seq: t.seq,
    server: t.server,
    tool: t.tool,
    args: t.args,
    isError: t.isError,
    result: t.result,
    durationMs: t.durationMs,
    createdAt: iso(t.createdAt),
  };
}

export function presentReview(r: ReviewArtifactRow) {
  return {
    id: r.id,
    runId: r.runId,
    sessionId: r.sessionId,
    phase: r.phase,
    iteration: r.iteration,
    blockingIssues: r.blockingIssues,
    nonBlockingIssues: r.nonBlockingIssues,
    score: r.score,
    fixPlan: r.fixPlan,
    createdAt: iso(r.createdAt),
  };
}

export function presentPhaseArtifact(a: PhaseArtifact) {
  return { phase: a.phase, content: a.content, createdAt: iso(a.createdAt) };
}
