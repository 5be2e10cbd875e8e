import {
  type IterationOutcome,
  type IterationRecord,
  type IterationSnapshot,
  type IterationStatus,
  type NewToolCall,
  type PhaseArtifact,
  PIPELINE_PHASES,
  type PipelinePhase,
  queuedRun,
  type ReviewArtifact,
  type RunChange,
  type RunReason,
  type RunRecord,
  type RunSpec,
  type RunStatus,
  type SessionRecord,
  type ToolFailure,
} from "@looprun/core";
import type {
  iterationSnapshots,
  iterations,
  phaseArtifacts,
  reviewArtifacts,
  runChanges,
  runs,
  sessions,
  toolCalls,
} from "./schema";

export type RunRow = typeof runs.$inferSelect;
export type IterationRow = typeof iterations.$inferSelect;
export type ToolCallRow = typeof toolCalls.$inferSelect;
export type ReviewArtifactRow = typeof reviewArtifacts.$inferSelect;
export type SessionRow = typeof sessions.$inferSelect;
export type IterationSnapshotRow = typeof iterationSnapshots.$inferSelect;
export type RunChangeRow = typeof runChanges.$inferSelect;
export type PhaseArtifactRow = typeof phaseArtifacts.$inferSelect;

/**
 * A queued run's row as a submit stores it — the values written, every other column its
 * default. Both engines' submits write these values and read nothing back (run-store-suite.ts
 * reads the row back on each engine and compares).
 */
export function queuedRunRow(input: {
  id: string;
  sessionId: string;
  spec: RunSpec;
  workspace: string;
  createdAt: number;
}): RunRow {
  return { ...queuedRun(input), task: input.spec.task, stopRequestedAt: null };
}

/** A failed tool call as the prompt's "failed so far" list takes it. */
export function toToolFailure(c: ToolCallRow): ToolFailure {
  return { iteration: c.iteration, server: c.server, tool: c.tool, args: c.args, error: c.result };
}

/** A commit's tool calls as rows, numbered on from `lastSeq` (the run's highest so far). */
export function toolCallRows(calls: NewToolCall[], runId: string, lastSeq: number, now: number) {
  return calls.map((c, i) => ({
    ...c,
    args: c.args ?? null,
    runId,
    seq: lastSeq + i + 1,
    createdAt: now,
  }));
}

export function toRunRecord(row: RunRow): RunRecord {
  return {
    id: row.id,
    sessionId: row.sessionId,
    // Runs stored before pipeline phases (and partial success, stall detection) existed.
    spec: {
      ...row.spec,
      phases: row.spec.phases ?? [],
      successThreshold: row.spec.successThreshold ?? 1,
      maxStalledIterations: row.spec.maxStalledIterations ?? 3,
      rollbackOnFailure: row.spec.rollbackOnFailure ?? false,
      approval: row.spec.approval ?? "none",
    },
    workspace: row.workspace,
    status: row.status as RunStatus,
    reason: row.reason as RunReason | null,
    summary: row.summary,
    iteration: row.iteration,
    progress: row.progress,
    metrics: row.metrics,
    consecutiveFailures: row.consecutiveFailures,
    stalledIterations: row.stalledIterations,
    partial: row.partial ?? null,
    approval: row.approval ?? null,
    pausedMs: row.pausedMs ?? 0,
    epoch: row.epoch,
    latestReviewId: row.latestReviewId,
    baselineSnapshot: row.baselineSnapshot ?? null,
    latestSnapshot: row.latestSnapshot ?? null,
    plan: row.plan ?? null,
    activePgid: row.activePgid ?? null,
    createdAt: row.createdAt,
    startedAt: row.startedAt,
    finishedAt: row.finishedAt,
    deadlineAt: row.deadlineAt,
  };
}

export function toIterationRecord(row: IterationRow): IterationRecord {
  return {
    runId: row.runId,
    n: row.n,
    attempt: row.attempt,
    status: row.status as IterationStatus,
    outcome: row.outcome as IterationOutcome | null,
    prompt: row.prompt,
    agent: row.agent,
    validation: row.validation,
    reviewId: row.reviewId,
    feedback: row.feedback,
    startedAt: row.startedAt,
    finishedAt: row.finishedAt,
  };
}

export function toSessionRecord(row: SessionRow): SessionRecord {
  return { id: row.id, workspace: row.workspace, createdAt: row.createdAt };
}

export function toReviewArtifact(row: ReviewArtifactRow): ReviewArtifact {
  return {
    id: row.id,
    runId: row.runId,
    sessionId: row.sessionId,
    phase: "review",
    iteration: row.iteration,
    blockingIssues: row.blockingIssues,
    nonBlockingIssues: row.nonBlockingIssues,
    score: row.score,
    fixPlan: row.fixPlan,
    createdAt: row.createdAt,
  };
}

export function toIterationSnapshot(row: IterationSnapshotRow): IterationSnapshot {
  return { ...row };
}

export function toRunChange(row: RunChangeRow): RunChange {
  return { ...row };
}

export function toPhaseArtifact(row: PhaseArtifactRow): PhaseArtifact {
  return {
    runId: row.runId,
    phase: row.phase as PipelinePhase,
    content: row.content,
    createdAt: row.createdAt,
  };
}

/** Artifacts in pipeline order (planning, architecture, design, packaging). */
export function inPhaseOrder(artifacts: PhaseArtifact[]): PhaseArtifact[] {
  return artifacts.sort(
    (a, b) => PIPELINE_PHASES.indexOf(a.phase) - PIPELINE_PHASES.indexOf(b.phase),
  );
}
