import type { AgentResult } from "./run";

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

/** What an abandoned attempt's agent result says in place of the output nobody kept. */
export const ABANDONED_AGENT_OUTPUT =
  "[looprun] abandoned: the attempt ended before its agent's result was recorded (its worker died or lost the run); the agent was killed and its output not kept";

/**
 * The agent result of an attempt whose worker died (or lost the run) while its agent ran —
 * null when it has one. Killed (`exitCode: null`), after the time until the attempt was found
 * abandoned. Stored on the attempt as it is marked abandoned, so it carries an agent result as
 * every ended iteration does.
 */
export function abandonedAgent(
  attempt: { startedAt: number; agent: unknown },
  now: number,
): AgentResult | null {
  if (attempt.agent !== null) return null;
  return {
    exitCode: null,
    output: ABANDONED_AGENT_OUTPUT,
    durationMs: Math.max(0, now - attempt.startedAt),
  };
}

/**
 * Whether `agent` is the result an abandoned attempt was given (see abandonedAgent), not one its
 * agent ended with: its duration is the time until the attempt was found, not the agent's run.
 */
export const isAbandonedAgent = (agent: AgentResult | null): boolean =>
  agent !== null && agent.exitCode === null && agent.output === ABANDONED_AGENT_OUTPUT;

/** The data of the `agent_finished` of iteration `n`'s abandoned agent (see abandonedAgent). */
export const abandonedAgentFinished = (n: number, agent: AgentResult) => ({
  iteration: n,
  exitCode: null,
  durationMs: agent.durationMs,
  abandoned: true as const,
});
