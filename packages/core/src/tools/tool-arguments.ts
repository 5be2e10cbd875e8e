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

/**
 * The most a tool call's arguments may weigh (as JSON) to be sent to its server: the MCP SDK's
 * stdio transport closes a connection whose message passes 10 MiB, and every later call of
 * the iteration would fail. A model writes far less in one answer.
 */
export const MAX_TOOL_ARGUMENTS_BYTES = 4 * 1024 * 1024;

/** Arguments kept with a stored call: up to this many bytes of JSON, else a note of their size. */
export const STORED_TOOL_ARGUMENTS_BYTES = 64 * 1024;

const jsonBytes = (value: unknown) =>
  Buffer.byteLength(typeof value === "string" ? value : (JSON.stringify(value) ?? ""), "utf8");

/** A call's arguments as stored: as given, or, past STORED_TOOL_ARGUMENTS_BYTES, their size. */
export function storedToolArguments(args: unknown): unknown {
  const bytes = jsonBytes(args);
  if (bytes <= STORED_TOOL_ARGUMENTS_BYTES) return args;
  return { "[looprun]": `${bytes} bytes of arguments, not stored (over 64 KiB)` };
}

/** Why arguments are too large to send, or null. */
export function argumentsTooLarge(value: Record<string, unknown>): string | null {
  const bytes = jsonBytes(value);
  return bytes > MAX_TOOL_ARGUMENTS_BYTES
    ? `the arguments are ${bytes} bytes, more than the ${MAX_TOOL_ARGUMENTS_BYTES} a tool call may carry (write a large file in parts)`
    : null;
}
