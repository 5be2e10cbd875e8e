export const EVENT_TYPES = [
  "run_queued",
  "run_started",
  "run_resumed",
  "iteration_started",
  "agent_started",
  "plan_created",
  "plan_updated",
  "tool_called",
  "step_completed",
  "agent_finished",
  "validation_passed",
  "validation_failed",
  "promise_missing",
  "review_approved",
  "review_blocking_detected",
  "phase_failed",
  "phase_started",
  "phase_completed",
  "budget_exhausted",
  "cooldown_started",
  "stop_requested",
  "rollback_applied",
  "approval_requested",
  "approval_granted",
  "approval_rejected",
  "reply_received",
  "run_finished",
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Carried by every event's data. */
export interface BudgetSnapshot {
  elapsedMs: number;
  remainingIterations: number;
  reason?: string;
}

export interface NewEvent {
  type: EventType;
  data: { budget: BudgetSnapshot } & Record<string, unknown>;
}

export interface EventRecord extends NewEvent {
  runId: string;
  seq: number;
  at: number;
}
