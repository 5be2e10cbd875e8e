import type { Context } from "hono";
import { z } from "zod";
import { fromZodError, invalidRequest } from "./errors";
import { readBodyText } from "./request-body";

/** Parses the JSON body with `schema`; a 400 names the offending field. */
export async function parseBody<S extends z.ZodType>(c: Context, schema: S): Promise<z.infer<S>> {
  let body: unknown;
  try {
    body = JSON.parse(await readBodyText(c));
  } catch {
    throw invalidRequest([{ path: "", message: "body must be valid JSON" }]);
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw fromZodError(parsed.error);
  return parsed.data;
}

/** Parses the query string with `schema` (a repeated key is refused). */
export function parseQuery<S extends z.ZodType>(c: Context, schema: S): z.infer<S> {
  const all = c.req.queries();
  const single: Record<string, string> = {};
  for (const [key, values] of Object.entries(all)) {
    if (values.length > 1) throw invalidRequest([{ path: key, message: "given more than once" }]);
    single[key] = values[0] ?? "";
  }
  const parsed = schema.safeParse(single);
  if (!parsed.success) throw fromZodError(parsed.error);
  return parsed.data;
}

/**
 * A whole number in a query string, checked by `schema`: decimal digits only. An empty value,
 * `0x10` or `1e3` is refused, not read as 0, 16 or 1000 as `Number()` would.
 */
export function queryInt<S extends z.ZodType>(schema: S) {
  return z.preprocess(
    (value) => (typeof value === "string" && /^\d{1,15}$/.test(value) ? Number(value) : value),
    schema,
  );
}
