import { messageOf } from "../util/errors";

export type ParsedArguments =
  | { ok: true; value: Record<string, unknown> }
  | { ok: false; error: string };

/**
 * A tool call's arguments as a JSON object: models send them as JSON text (none is `{}`), and
 * an object is taken as it is.
 */
export function parseToolArguments(args: unknown): ParsedArguments {
  let value = args;
  if (typeof value === "string") {
    if (value.trim() === "") return { ok: true, value: {} };
    try {
      value = JSON.parse(value);
    } catch (error) {
      return { ok: false, error: `the arguments are not valid JSON: ${messageOf(error)}` };
    }
  }
  if (value === undefined || value === null) return { ok: true, value: {} };
  if (typeof value !== "object" || Array.isArray(value)) {
    return { ok: false, error: "the arguments must be a JSON object" };
  }
  return { ok: true, value: value as Record<string, unknown> };
}
