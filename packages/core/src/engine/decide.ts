import type { IterationOutcome, IterationStatus, RunReason } from "../domain/run";

export interface IterationFacts {
  agentExitCode: number | null;
  agentOutput: string;
  validationPassed: boolean;
  validationFeedback: string;
  /** `null` when the run asked for no completion promise. */
  promiseFound: boolean | null;
  completionPromise: string | null;
  consecutiveFailures: number;
}

export type IterationDecision =
  | { kind: "complete"; status: IterationStatus; outcome: IterationOutcome }
  | {
      kind: "retry";
      status: IterationStatus;
      outcome: IterationOutcome;
      feedback: string;
      consecutiveFailures: number;
    }
  | {
      kind: "fail";
      status: IterationStatus;
      outcome: IterationOutcome;
      feedback: string;
      reason: RunReason;
      consecutiveFailures: number;
    };

/** Three iterations in a row whose agent phase failed end the run. */
export const MAX_CONSECUTIVE_FAILURES = 3;

const tail = (text: string, max: number) => (text.length > max ? text.slice(-max) : text);

/**
 * The gates alone decide success; a failed agent phase (non-zero exit) only counts
 * towards `consecutive_failures`.
 */
export function decideIteration(facts: IterationFacts): IterationDecision {
  const agentFailed = facts.agentExitCode !== 0;
  const promiseOk = facts.promiseFound !== false;
  if (facts.validationPassed && promiseOk) {
    return { kind: "complete", status: "passed", outcome: "complete" };
  }
  const feedback: string[] = [];
  if (agentFailed) {
    feedback.push(
      `The agent exited with code ${facts.agentExitCode ?? "none (killed)"}. Its output ended with:\n${tail(facts.agentOutput, 4000).trimEnd()}`,
    );
  }
  if (!facts.validationPassed) {
    feedback.push(`Validation failed:\n\n${facts.validationFeedback}`);
  }
  if (!promiseOk) {
    feedback.push(
      `The completion promise was not given: print <promise>${facts.completionPromise}</promise> only when the task is complete.`,
    );
  }
  const outcome: IterationOutcome = agentFailed
    ? "agent_failed"
    : !facts.validationPassed
      ? "validation_failed"
      : "promise_missing";
  const consecutiveFailures = agentFailed ? facts.consecutiveFailures + 1 : 0;
  const text = feedback.join("\n\n");
  if (consecutiveFailures >= MAX_CONSECUTIVE_FAILURES) {
    return {
      kind: "fail",
      status: "failed",
      outcome,
      feedback: text,
      reason: "consecutive_failures",
      consecutiveFailures,
    };
  }
  return { kind: "retry", status: "failed", outcome, feedback: text, consecutiveFailures };
}
