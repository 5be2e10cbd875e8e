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

export type JsonAnswer<T> = { ok: true; value: T } | { ok: false; error: string };

/** Drops one Markdown code fence around an answer, as models sometimes add one. */
function unfence(text: string): string {
  const match = /^```[A-Za-z]*\n([\s\S]*?)\n?```$/.exec(text.trim());
  return match ? (match[1] ?? "") : text;
}

/** Parses `text` as JSON and validates it with `schema`; the error names the bad fields. */
export function parseJsonAnswer<S extends z.ZodType>(
  schema: S,
  text: string | null,
): JsonAnswer<z.infer<S>> {
  let json: unknown;
  try {
    json = JSON.parse(unfence(text ?? ""));
  } catch {
    return { ok: false, error: "the answer is not valid JSON" };
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    return {
      ok: false,
      error: parsed.error.issues
        .map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`)
        .join("; "),
    };
  }
  return { ok: true, value: parsed.data };
}
