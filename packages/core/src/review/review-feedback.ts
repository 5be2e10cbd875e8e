import type { ReviewFindings } from "./review-findings";

/** The next iteration's feedback after a blocking review: the issues, then the fix plan. */
export function reviewFeedback(findings: ReviewFindings): string {
  const parts = [
    `The reviewer found ${findings.blockingIssues.length} blocking issue${findings.blockingIssues.length === 1 ? "" : "s"}:\n${findings.blockingIssues.map((i) => `- ${i}`).join("\n")}`,
  ];
  const plan =
    findings.fixPlan.length > 0
      ? findings.fixPlan
      : findings.blockingIssues.map((i) => `Resolve: ${i}`);
  parts.push(`Fix plan:\n${plan.map((step, i) => `${i + 1}. ${step}`).join("\n")}`);
  if (findings.nonBlockingIssues.length > 0) {
    parts.push(
      `Non-blocking remarks (optional):\n${findings.nonBlockingIssues.map((i) => `- ${i}`).join("\n")}`,
    );
  }
  return parts.join("\n\n");
}
