import { z } from "zod";

const issue = z.string().trim().min(1).max(4000);

/** What every reviewer must produce (a command on stdout, an LLM as its answer), zod-checked. */
export const ReviewFindings = z.object({
  blockingIssues: z.array(issue).max(100),
  nonBlockingIssues: z.array(issue).max(100),
  score: z.number().min(0).max(100),
  fixPlan: z.array(issue).max(100),
});
export type ReviewFindings = z.infer<typeof ReviewFindings>;

/** A reviewer's verdict, or why there is none (never to be read as an approval). */
export type ReviewOutcome =
  | {
      ok: true;
      findings: ReviewFindings /** Extra context for the events (the blind reading). */;
      notes?: string;
    }
  | { ok: false; error: string };
