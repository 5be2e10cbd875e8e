import type { z } from "zod";

// A model's (or a command's) answer that must be JSON of a given shape: reviews, plans.

export type JsonAnswer<T> = { ok: true; value: T } | { ok: false; error: string };

/** The first Markdown code block of an answer (models often wrap JSON in one, with words around). */
const CODE_BLOCK = /```[\w-]*[ \t]*\r?\n([\s\S]*?)\r?\n?[ \t]*```/;

/** The answer as JSON: the whole text, or else its first code block. */
function parseAnswer(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    const block = CODE_BLOCK.exec(text)?.[1];
    if (block === undefined) throw error;
    return JSON.parse(block);
  }
}

/** Parses `text` as JSON and validates it with `schema`; the error names the bad fields. */
export function parseJsonAnswer<S extends z.ZodType>(
  schema: S,
  text: string | null,
): JsonAnswer<z.infer<S>> {
  let json: unknown;
  try {
    json = parseAnswer(text ?? "");
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
