import type { z } from "zod";

// A model's (or a command's) answer that must be JSON of a given shape: reviews, plans.

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
