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
 * A whole number in a query string, checked by `schema`: decimal digits only, perhaps after a
 * minus (which `schema` then refuses as too small, saying so). An empty value, `0x10`, `1e3` or
 * `1.5` is refused as not a whole number, not read as 0, 16, 1000 or 1.5 as `Number()` would.
 */
export function queryInt<S extends z.ZodType>(schema: S) {
  return z.preprocess((value, ctx) => {
    if (typeof value !== "string") return value;
    if (/^-?\d+$/.test(value))
      return Math.max(-MAX_QUERY_INT, Math.min(MAX_QUERY_INT, Number(value)));
    ctx.addIssue({
      code: "custom",
      message: "must be a whole number (decimal digits)",
      input: value,
    });
    return z.NEVER;
  }, schema);
}

/**
 * Past the safe integers, which `.int()` refuses as too big: longer numbers are read as this,
 * so that the answer says why, where no schema's own bound would.
 */
const MAX_QUERY_INT = Number.MAX_SAFE_INTEGER + 1;
