import type { ChatMessage } from "../llm/chat-model";
import { askForJson, type LlmCallOptions } from "./llm-ask";
import { ReviewFindings, type ReviewOutcome } from "./review-findings";
import { capDiff, type ReviewInput, renderValidation } from "./review-input";

export interface LlmReviewOptions extends LlmCallOptions {
  /** @defaultValue 100000 — characters of the diff a model is shown */
  diffCapChars?: number;
}

export const REVIEW_SYSTEM = [
  "You are a meticulous code reviewer. You judge whether a change meets its task and requirements.",
  "Answer with a JSON object only, in this shape:",
  '{"blockingIssues": ["…"], "nonBlockingIssues": ["…"], "score": 0-100, "fixPlan": ["…"]}',
  "- blockingIssues: what must be fixed before the change is acceptable: a requirement not met, a bug, broken or missing behaviour. Empty when there is none.",
  "- nonBlockingIssues: style, naming, small improvements that need not hold the change back.",
  "- score: your overall rating of the change, 0 (unusable) to 100 (perfect).",
  "- fixPlan: ordered, concrete steps that resolve every blocking issue (empty when there is none).",
  "Do not report as blocking what the requirements do not ask for.",
].join("\n");

/** One structured LLM review of the change, the validation results and the requirements. */
export async function runMistralReview(
  input: ReviewInput,
  opts: LlmReviewOptions,
): Promise<ReviewOutcome> {
  const user = [
    `# Task\n\n${input.task}`,
    `# Requirements\n\n${input.requirements ?? "(none beyond the task)"}`,
    `# Validation of iteration ${input.iteration}\n\n${renderValidation(input.validation)}`,
    `# The change (unified diff against the workspace before the run)\n\n\`\`\`diff\n${capDiff(input.diff, opts.diffCapChars ?? 100_000) || "(no change)\n"}\`\`\``,
  ].join("\n\n");
  const messages: ChatMessage[] = [
    { role: "system", content: REVIEW_SYSTEM },
    { role: "user", content: user },
  ];
  const answer = await askForJson(opts, messages, ReviewFindings);
  return answer.ok ? { ok: true, findings: answer.value } : { ok: false, error: answer.error };
}
