import { z } from "zod";
import type { ChatMessage } from "../llm/chat-model";
import { askForJson, askForText } from "./llm-ask";
import type { LlmReviewOptions } from "./mistral-reviewer";
import type { ReviewOutcome } from "./review-findings";
import { capDiff, type ReviewInput } from "./review-input";

const item = z.string().trim().min(1).max(4000);

/** The second pass's answer: the description held against the requirements. */
export const DiscrepancyReport = z.object({
  missedRequirements: z.array(item).max(100),
  extraBehaviour: z.array(item).max(100),
  likelyBugs: z.array(item).max(100),
  score: z.number().min(0).max(100),
  fixPlan: z.array(item).max(100),
});
export type DiscrepancyReport = z.infer<typeof DiscrepancyReport>;

export const BLIND_SYSTEM = [
  "You are a blind code reviewer: you see a code change (a unified diff) and nothing else — not why it was made.",
  "Describe precisely what the changed code does: its behaviour, inputs and outputs, the cases it handles and those it does not, its side effects.",
  "Describe only what the code does, not what it was probably meant to do. Answer in plain text.",
].join("\n");

export const DISCREPANCY_SYSTEM = [
  "You compare what a code change does — described by a reviewer who read only the code — with the task and requirements it was written for.",
  "You do not see the code. Report the discrepancies as a JSON object only, in this shape:",
  '{"missedRequirements": ["…"], "extraBehaviour": ["…"], "likelyBugs": ["…"], "score": 0-100, "fixPlan": ["…"]}',
  "- missedRequirements: requirements the described behaviour does not meet.",
  "- extraBehaviour: behaviour nobody asked for.",
  "- likelyBugs: behaviour that is probably wrong.",
  "- score: 0 (does not match at all) to 100 (matches exactly).",
  "- fixPlan: ordered, concrete steps that resolve the missed requirements and the bugs (empty when there is none).",
].join("\n");

/**
 * Triangular review: pass 1, a blind reviewer, gets only the diff and describes what the
 * change does; pass 2 gets only the task, the requirements and that description (never the
 * code) and reports missed requirements, extra behaviour and likely bugs. Missed
 * requirements and bugs are blocking; extra behaviour is not.
 */
export async function runTriangularReview(
  input: ReviewInput,
  opts: LlmReviewOptions,
): Promise<ReviewOutcome> {
  const blind: ChatMessage[] = [
    { role: "system", content: BLIND_SYSTEM },
    {
      role: "user",
      content: `What does this change do?\n\n\`\`\`diff\n${capDiff(input.diff, opts.diffCapChars ?? 100_000) || "(an empty diff: nothing changed)\n"}\`\`\``,
    },
  ];
  const reading = await askForText(opts, blind);
  if (!reading.ok) return { ok: false, error: `blind pass: ${reading.error}` };

  const compare: ChatMessage[] = [
    { role: "system", content: DISCREPANCY_SYSTEM },
    {
      role: "user",
      content: [
        `# Task\n\n${input.task}`,
        `# Requirements\n\n${input.requirements ?? "(none beyond the task)"}`,
        `# What the change does (as described by a reviewer who read only the code)\n\n${reading.value}`,
      ].join("\n\n"),
    },
  ];
  const report = await askForJson(opts, compare, DiscrepancyReport);
  if (!report.ok) return { ok: false, error: `discrepancy pass: ${report.error}` };
  const r = report.value;
  return {
    ok: true,
    findings: {
      blockingIssues: [
        ...r.missedRequirements.map((m) => `Requirement missed: ${m}`),
        ...r.likelyBugs.map((b) => `Likely bug: ${b}`),
      ],
      nonBlockingIssues: r.extraBehaviour.map((e) => `Extra behaviour: ${e}`),
      score: r.score,
      fixPlan: r.fixPlan,
    },
    notes: reading.value,
  };
}
