import { planFromAnswer } from "../agents/plan";
import { type EditedPlan, isWaiting } from "../domain/approval";
import type { Plan } from "../domain/plan";
import type { RunRecord } from "../domain/run";
import type { RunPatch } from "./run-store";

/**
 * What ends a wait for a person (approve, reply, reject, stop): the wait is answered, its time
 * joins `pausedMs` and the deadline moves forward by it, so the budget clock did not run.
 */
export function endWait(run: RunRecord, now: number): RunPatch {
  const approval = run.approval;
  if (!isWaiting(approval)) return {};
  const waited = Math.max(0, now - approval.requestedAt);
  return {
    approval: { ...approval, resolvedAt: now },
    pausedMs: run.pausedMs + waited,
    ...(run.deadlineAt !== null ? { deadlineAt: run.deadlineAt + waited } : {}),
  };
}

/** A person's edit of the agent's plan: the next version, every step to do. */
export function planFromEdit(previous: Plan | null, edited: EditedPlan): Plan {
  return planFromAnswer(edited, previous, "edited by a person at approval");
}

/** A person's edit of the planning phase's plan, as the text that replaces its artifact. */
export function renderEditedPlan(edited: EditedPlan): string {
  const steps = edited.steps.map(
    (s, i) => `${i + 1}. ${s.title}${s.detail ? `\n   ${s.detail.replaceAll("\n", "\n   ")}` : ""}`,
  );
  return `# Plan (edited by a person at approval)\n\n${steps.join("\n")}\n`;
}

/** The blocked iteration's feedback with a person's answer: the next iteration's prompt holds it. */
export function feedbackWithReply(feedback: string | null, message: string): string {
  return `${feedback ? `${feedback}\n\n` : ""}A person answered your question:\n${message}`;
}

/** The run's progress line while it waits. */
export function waitingProgress(kind: "plan" | "question", question: string | null): string {
  if (kind === "plan") return "awaiting approval of the plan: approve or reject it";
  const q = (question ?? "").replaceAll(/\s+/g, " ").trim();
  return `blocked, waiting for a reply: ${q.length > 500 ? `${q.slice(0, 499)}…` : q}`;
}
