import { createHash } from "node:crypto";
import { baseToolName } from "../tools/tool-names";
import { argumentShape } from "./argument-shape";

/*
 * What one tool call is an instance of (its pattern's `shape`). Calls of a tool with one
 * argument shape are one approach, with two refinements, so that one failing call does not
 * put the whole tool on the "failed before" list:
 * - the built-in `run_command` is keyed by the command itself (`$ npm test`), as validation
 *   commands are: `npm test` failing says nothing about `ls`;
 * - a failed call of any other tool is keyed by its shape and its error kind
 *   (`{path:string} ! no such file or directory: <path>`), apart from the successes of that
 *   shape, which stay in the plain-shape row. How often the tool fails that way is then
 *   weighed against all its calls with that shape (see pattern-advice.ts).
 * Rows stored before these refinements (run_command by `{command:string}`, failures mixed
 * into the plain-shape row) stay readable: the former are no longer advice, the latter keep
 * counting successes.
 */

/** The built-in workspace server's command tool (`server.tool`). */
export const RUN_COMMAND_SUBJECT = "workspace.run_command";
/** Starts the shape of a `run_command` pattern keyed by its command. */
export const COMMAND_SHAPE_PREFIX = "$ ";
/** Separates a failed call's argument shape from its error kind. */
export const ERROR_KIND_SEPARATOR = " ! ";

/** Characters of a command line, and of an error kind, kept in a key. */
const COMMAND_KEY_CHARS = 300;
const ERROR_KIND_CHARS = 120;
/** Argument values shorter than this are left in an error kind. */
const MIN_REPLACED_CHARS = 3;

/**
 * Bytes (UTF-8) of a pattern's `subject`, and of a tool call's argument shape or command, in
 * its key (a failed call's shape adds ` ! ` and its error kind: at most 121 characters, 363
 * bytes). PostgreSQL's index entries are at most 2,704 bytes, and a longer key failed the
 * run's write there (a 4,000-character command): with the workspace path (at most 1,000
 * characters under WORKSPACES_ROOT) and the scope, a key stays under it for a root of up to
 * ~500 bytes.
 */
export const KEY_PART_BYTES = 400;

/**
 * `text` as a pattern's key holds it: itself when it fits in KEY_PART_BYTES, else its start
 * cut at a character, `…#` and 12 hex digits of its SHA-256 — still one key per text, and the
 * same in every process and on both stores.
 */
export function boundedKeyPart(text: string): string {
  if (Buffer.byteLength(text) <= KEY_PART_BYTES) return text;
  const digest = createHash("sha256").update(text).digest("hex").slice(0, 12);
  const room = KEY_PART_BYTES - Buffer.byteLength(`…#${digest}`);
  let cut = "";
  let bytes = 0;
  for (const char of text) {
    bytes += Buffer.byteLength(char);
    if (bytes > room) break;
    cut += char;
  }
  return `${cut}…#${digest}`;
}

/** The command of a `run_command` call, or null when the call is another tool's. */
function commandOf(server: string, tool: string, args: unknown): string | null {
  if (`${server}.${tool}` !== RUN_COMMAND_SUBJECT) return null;
  const command = (args as { command?: unknown } | null)?.command;
  if (typeof command !== "string") return null;
  const normalized = command.trim().replace(/\s+/g, " ");
  return normalized === "" ? null : normalized.slice(0, COMMAND_KEY_CHARS);
}

/** The string values of a call's arguments (one level of nesting), longest first. */
function argumentStrings(args: unknown): Array<[string, string]> {
  const found: Array<[string, string]> = [];
  const visit = (value: unknown, name: string, depth: number) => {
    if (typeof value === "string") {
      // Shorter values would be found inside the message's own words.
      if (value.trim().length >= MIN_REPLACED_CHARS) found.push([name, value]);
    } else if (value !== null && typeof value === "object" && depth < 2) {
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
        visit(v, Array.isArray(value) ? name : k, depth + 1);
      }
    }
  };
  visit(args, "value", 0);
  return found.sort((a, b) => b[1].length - a[1].length);
}

/**
 * The kind of a failed call's error: its first line with the call's own argument values
 * replaced by their names and numbers by `N` — `no such file or directory: <path>` for every
 * missing file. Not a decision on the message (nothing branches on it): only a grouping key,
 * so the same failure of different calls counts as one pattern.
 */
function errorKind(args: unknown, error: string): string {
  let text = error.trim().split("\n", 1)[0] ?? "";
  for (const [name, value] of argumentStrings(args)) text = text.split(value).join(`<${name}>`);
  text = text.replace(/\d+/g, "N").replace(/\s+/g, " ").trim();
  return text.length > ERROR_KIND_CHARS ? `${text.slice(0, ERROR_KIND_CHARS)}…` : text;
}

/** The `shape` of the pattern a tool call belongs to (see above). */
export function toolCallShape(call: {
  server: string;
  tool: string;
  args: unknown;
  isError: boolean;
  result: string;
}): string {
  const command = commandOf(call.server, call.tool, call.args);
  if (command !== null) return boundedKeyPart(`${COMMAND_SHAPE_PREFIX}${command}`);
  // Bounded before the error kind is added: a failure's row names the same shape as the
  // successes' row (they are weighed together), and the kind (at most 120 characters) stays
  // readable after it.
  const shape = boundedKeyPart(argumentShape(call.args));
  return call.isError
    ? `${shape}${ERROR_KIND_SEPARATOR}${errorKind(call.args, call.result)}`
    : shape;
}

/** A tool pattern's shape, read back: what kind of row it is. */
export type ToolShape =
  | { kind: "command"; command: string }
  /** The calls with this argument shape (successes; failures too in rows from before). */
  | { kind: "calls"; shape: string }
  | { kind: "error"; shape: string; error: string }
  /** `run_command` keyed by its argument shape (rows from before): says nothing. */
  | { kind: "legacy_command" };

export function parseToolShape(subject: string, shape: string): ToolShape {
  if (subject === RUN_COMMAND_SUBJECT) {
    return shape.startsWith(COMMAND_SHAPE_PREFIX)
      ? { kind: "command", command: shape.slice(COMMAND_SHAPE_PREFIX.length) }
      : { kind: "legacy_command" };
  }
  const at = shape.indexOf(ERROR_KIND_SEPARATOR);
  return at < 0
    ? { kind: "calls", shape }
    : {
        kind: "error",
        shape: shape.slice(0, at),
        error: shape.slice(at + ERROR_KIND_SEPARATOR.length),
      };
}

/**
 * The function name the model calls a tool by (`workspace__read_text_file`): how the tool hub
 * names `server.tool` (tools/tool-names.ts). A hub that had to add a `_2` to tell two tools
 * apart is not known here; the base name is what the model sees for every other tool.
 */
export function functionName(subject: string): string {
  const dot = subject.indexOf(".");
  if (dot <= 0) return subject;
  return baseToolName(subject.slice(0, dot), subject.slice(dot + 1));
}
