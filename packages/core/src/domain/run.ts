import type { ApprovalRequest } from "./approval";
import type { Plan } from "./plan";
import type { RunSpec } from "./run-spec";

export const RUN_STATUSES = [
  "queued",
  "running",
  "awaiting_approval",
  "stopping",
  "succeeded",
  "failed",
  "stopped",
] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/** Statuses that hold a session: at most one run per session may be in one of them. */
export const ACTIVE_STATUSES = ["queued", "running", "awaiting_approval", "stopping"] as const;
export const TERMINAL_STATUSES = ["succeeded", "failed", "stopped"] as const;

export function isTerminal(status: RunStatus): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

/** Whether a status holds its session (a stored row's status is read as a plain string). */
export function isActive(status: string): boolean {
  return (ACTIVE_STATUSES as readonly string[]).includes(status);
}

export type RunReason =
  | "success"
  | "max_iterations"
  | "max_minutes"
  | "max_tokens"
  | "stopped"
  | "consecutive_failures"
  | "stalled"
  | "error";

export type BudgetReason = "max_iterations" | "max_minutes" | "max_tokens";

export interface RunMetrics {
  /** Iterations finished (a decision was recorded). */
  iterations: number;
  validationFailures: number;
  reviewBlockings: number;
  toolCalls: number;
  toolFailures: number;
  tokens: number;
}

export const EMPTY_METRICS: RunMetrics = {
  iterations: 0,
  validationFailures: 0,
  reviewBlockings: 0,
  toolCalls: 0,
  toolFailures: 0,
  tokens: 0,
};

/** A run as persisted. Times are epoch milliseconds. */
export interface RunRecord {
  id: string;
  sessionId: string;
  spec: RunSpec;
  /** Absolute, resolved path of the run's workspace. */
  workspace: string;
  status: RunStatus;
  reason: RunReason | null;
  summary: string | null;
  /** Number of the latest iteration started (0 before the first). */
  iteration: number;
  progress: string | null;
  metrics: RunMetrics;
  consecutiveFailures: number;
  /** Fencing token: increases on every claim; writes carry the epoch they were claimed with. */
  epoch: number;
  latestReviewId: string | null;
  /** The workspace before the run's first iteration (a commit in the session's snapshot git dir). */
  baselineSnapshot: string | null;
  /** The workspace after the latest snapshotted iteration (the baseline before the first). */
  latestSnapshot: string | null;
  /** Process group of the command in flight (killed by whoever resumes after a crash). */
  activePgid: number | null;
  /** The mistral agent's plan, when it plans. */
  plan: Plan | null;
  /** Iterations in a row that made no progress (see `engine/stall-detector.ts`). */
  stalledIterations: number;
  /** Set when the run succeeded although some validation commands failed (`successThreshold` < 1). */
  partial: PartialSuccess | null;
  /** What a person must approve or answer (the latest request; see `ApprovalRequest`). */
  approval: ApprovalRequest | null;
  /** Time spent waiting for a person, answered waits only: the budget clock does not count it. */
  pausedMs: number;
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
  deadlineAt: number | null;
}

/** A run as a submit makes it: queued, nothing run, counted or decided yet. */
export function queuedRun(
  input: Pick<RunRecord, "id" | "sessionId" | "spec" | "workspace" | "createdAt">,
): RunRecord {
  return {
    id: input.id,
    sessionId: input.sessionId,
    spec: input.spec,
    workspace: input.workspace,
    status: "queued",
    reason: null,
    summary: null,
    iteration: 0,
    progress: "queued",
    metrics: { ...EMPTY_METRICS },
    consecutiveFailures: 0,
    epoch: 0,
    latestReviewId: null,
    baselineSnapshot: null,
    latestSnapshot: null,
    activePgid: null,
    plan: null,
    stalledIterations: 0,
    partial: null,
    approval: null,
    pausedMs: 0,
    createdAt: input.createdAt,
    startedAt: null,
    finishedAt: null,
    deadlineAt: null,
  };
}

export type IterationStatus = "running" | "passed" | "failed" | "abandoned";
export type IterationOutcome =
  | "complete"
  | "agent_failed"
  | "validation_failed"
  | "review_blocking"
  | "promise_missing"
  | "stopped"
  | "budget_exhausted"
  | "error";

/** A success under `successThreshold`: how many validation commands ("gates") passed, which failed. */
export interface PartialSuccess {
  passed: number;
  total: number;
  /** The failed validation commands. */
  failed: string[];
}

export interface AgentResult {
  exitCode: number | null;
  output: string;
  durationMs: number;
}

export interface ValidationResult {
  command: string;
  exitCode: number | null;
  durationMs: number;
  output: string;
}

export interface IterationRecord {
  runId: string;
  n: number;
  attempt: number;
  status: IterationStatus;
  outcome: IterationOutcome | null;
  /** The prompt the agent received (task, feedback of the previous iteration, …). */
  prompt: string;
  agent: AgentResult | null;
  validation: ValidationResult[];
  reviewId: string | null;
  /** What this iteration found wrong: handed to the next iteration's prompt. */
  feedback: string | null;
  startedAt: number;
  finishedAt: number | null;
}

/** A tool call as the engine records it; the store numbers it (`seq`, per run). */
export interface NewToolCall {
  iteration: number;
  server: string;
  tool: string;
  args: unknown;
  isError: boolean;
  result: string;
  durationMs: number;
}

export interface SessionRecord {
  id: string;
  workspace: string;
  createdAt: number;
}
