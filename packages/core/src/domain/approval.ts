/**
 * A run waiting for a person (status `awaiting_approval`): a plan to approve, or a question
 * of a blocked agent to answer. Stored with the run; cleared when the run goes on.
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
}
