import type { IterationOutcome, IterationStatus, RunReason } from "../domain/run";
import { reviewFeedback } from "../review/review-feedback";
import type { ReviewFindings } from "../review/review-findings";
import { capHead } from "../util/cut-marks";
import { forPrompt } from "../util/for-prompt";

/**
 * What the next prompt carries of a blocking review (its issues, then its fix plan, from the
 * start): a reviewer may list 300 items of 4,000 characters; the review itself is stored whole.
 */
export const REVIEW_FEEDBACK_BYTES = 16 * 1024;

export interface IterationFacts {
  agentExitCode: number | null;
  agentOutput: string;
  validationPassed: boolean;
  validationFeedback: string;
  /** `null` when the run asked for no completion promise. */
  promiseFound: boolean | null;
  /** What the agent printed in a promise's place, when not the run's promise. */
  promiseOther?: string | null;
  completionPromise: string | null;
  consecutiveFailures: number;
  /** The review of this iteration; `null` when none ran (none configured, or the gates failed). */
  review?: ReviewFindings | null;
  /** The question of an agent that reported `blocked`: the run waits for a person's reply. */
  blockedQuestion?: string | null;
  /**
   * The run's token budget ran out before the iteration could be weighed whole: it cut the
   * agent's turn (`"agent"`), or left nothing for an LLM review (`"review"`, which then did not
   * run). Unless the gates passed all the same, the run ends by its budget (`max_tokens`).
   */
  budgetSpent?: "agent" | "review" | null;
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
      /** The agent is blocked on a question: the run waits for a person (`awaiting_approval`). */
      kind: "await_reply";
      status: IterationStatus;
      outcome: IterationOutcome;
      feedback: string;
      question: string;
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

/**
 * The last `max` characters of `text` as a terminal shows it (escape codes, progress bars and
 * control bytes would take the room of its last lines), never starting with half a character.
 */
function tail(text: string, max: number): string {
  const shown = forPrompt(text);
  if (shown.length <= max) return shown;
  let start = shown.length - max;
  const unit = shown.charCodeAt(start);
  if (unit >= 0xdc00 && unit <= 0xdfff) start++;
  return shown.slice(start);
}

/**
 * The gates alone decide success (validation, the completion promise, and a review without
 * blocking issues); a failed agent phase (non-zero exit) only counts towards
 * `consecutive_failures`. A blocking review's fix plan becomes the feedback.
 */
export function decideIteration(facts: IterationFacts): IterationDecision {
  const agentFailed = facts.agentExitCode !== 0;
  const promiseOk = facts.promiseFound !== false;
  const reviewBlocking = (facts.review?.blockingIssues.length ?? 0) > 0;
  const spent = facts.budgetSpent ?? null;
  if (facts.validationPassed && promiseOk && !reviewBlocking && spent !== "review") {
    return { kind: "complete", status: "passed", outcome: "complete" };
  }
  const feedback: string[] = [];
  const blocked = facts.blockedQuestion ?? null;
  if (spent === "agent") {
    feedback.push("The token budget ran out during the agent's turn.");
  } else if (spent === "review") {
    feedback.push("The token budget ran out before the review was done.");
  } else if (agentFailed && blocked === null) {
    const output = tail(facts.agentOutput, 4000).trimEnd();
    const ended =
      facts.agentExitCode === null
        ? "The agent was killed (it did not exit by itself)."
        : `The agent exited with code ${facts.agentExitCode}.`;
    feedback.push(
      `${ended}${output ? ` Its output ended with:\n${output}` : " It printed nothing."}`,
    );
  }
  if (!facts.validationPassed) {
    feedback.push(`Validation failed:\n\n${facts.validationFeedback}`);
  }
  if (!promiseOk) {
    const other = facts.promiseOther
      ? ` You printed <promise>${facts.promiseOther}</promise>: the text must be exactly ${facts.completionPromise}.`
      : "";
    feedback.push(
      `The completion promise was not given: print <promise>${facts.completionPromise}</promise> only when the task is complete.${other}`,
    );
  }
  if (reviewBlocking && facts.review) {
    feedback.push(capHead(reviewFeedback(facts.review), REVIEW_FEEDBACK_BYTES));
  }
  // The first gate that failed (one did: the iteration did not complete).
  const gateOutcome: IterationOutcome = !facts.validationPassed
    ? "validation_failed"
    : !promiseOk
      ? "promise_missing"
      : "review_blocking";
  // The budget's end, not the agent's failure: not counted towards `consecutive_failures`. A
  // retry that the budget check after every iteration ends (`max_tokens`: the tokens are spent).
  if (spent !== null) {
    return {
      kind: "retry",
      status: "failed",
      outcome: "budget_exhausted",
      feedback: feedback.join("\n\n"),
      consecutiveFailures: facts.consecutiveFailures,
    };
  }
  // Asking a person is not a failed agent phase: it neither counts towards
  // `consecutive_failures` nor resets the count; the reply is added to this feedback. The
  // outcome is the gate that failed (the design's list has no "blocked"); the question is
  // the run's `approval`.
  if (blocked !== null) {
    feedback.push(`You reported that you are blocked and asked:\n${blocked}`);
    return {
      kind: "await_reply",
      status: "failed",
      outcome: gateOutcome,
      feedback: feedback.join("\n\n"),
      question: blocked,
      consecutiveFailures: facts.consecutiveFailures,
    };
  }
  const outcome: IterationOutcome = agentFailed ? "agent_failed" : gateOutcome;
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
