import { z } from "zod";
import { NOT_BLANK } from "./spec-limits";

/**
 * A run waiting for a person (status `awaiting_approval`): a plan to approve, or a question
 * of a blocked agent to answer. Stored with the run; the latest request stays on the run once
 * answered (`resolvedAt` set), so that a resumed run knows its plan was approved.
 */
export interface ApprovalRequest {
  /** `plan`: approve the plan made before iteration 1; `question`: the agent reported `blocked`. */
  kind: "plan" | "question";
  /** When the run began waiting (epoch ms); the budget clock is paused from then. */
  requestedAt: number;
  /** The iteration that asked (0 for a plan made before iteration 1). */
  iteration: number;
  /** The blocked agent's question (null for a plan). */
  question: string | null;
  /** The plan to approve as a person reads it: the agent's steps, or the planning phase's text. */
  plan: string | null;
  /** When a person approved, replied or rejected; null while the run waits. */
  resolvedAt: number | null;
}

/** Whether the run waits for a person right now (its budget clock is paused). */
export function isWaiting(approval: ApprovalRequest | null): approval is ApprovalRequest {
  return approval !== null && approval.resolvedAt === null;
}

/** `approval` of a submission: `plan` pauses the run after planning until a person approves. */
export const APPROVAL_MODES = ["none", "plan"] as const;
export type ApprovalMode = (typeof APPROVAL_MODES)[number];

/** A plan edited by a person (`POST /api/runs/:id/approve {plan}`). */
export const EditedPlan = z.strictObject({
  steps: z
    .array(
      z.strictObject({
        title: z.string().trim().min(1, NOT_BLANK).max(500),
        detail: z.string().max(2000).optional(),
      }),
    )
    .min(1)
    .max(30),
});
export type EditedPlan = z.infer<typeof EditedPlan>;
