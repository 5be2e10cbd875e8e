import type { Dirent } from "node:fs";
import { type FileHandle, open, readdir } from "node:fs/promises";
import { join, relative } from "node:path";
import { capHead, capHeadBytes, capTail } from "../util/cut-marks";
import { messageOf } from "../util/errors";
import { ToolFailure } from "./errors";
import { globMatcher } from "./glob-pattern";

/**
 * Files larger than this are not read whole (for `head` or `tail`): a model cannot use them
 * and they cost memory. A plain read reads no further than what it returns.
 */
export const MAX_READ_BYTES = 16 * 1024 * 1024;
/**
 * Bytes of text a read returns at most (a line says how much was left out). The MCP message
 * must stay well under the SDK stdio client's 10 MiB limit — a larger one closes the
 * connection and every later call fails — and JSON may escape a byte into six.
 */
export const MAX_RETURN_BYTES = 1024 * 1024;
/** Bytes looked at for a NUL byte, which says a file is binary (as git decides). */
const BINARY_PROBE_BYTES = 8000;
/** `search_files` stops after this many matches. */
export const MAX_SEARCH_RESULTS = 1000;

/** A readable sentence for a file-system error, naming the path the model gave. */
export function describeFsError(error: unknown, path: string): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  switch (code) {
    case "ENOENT":
      return `no such file or directory: ${path}`;
    case "EISDIR":
      return `${path} is a directory, not a file`;
    case "ENOTDIR":
      return `${path} is not a directory (or a component of it is a file)`;
    case "EACCES":
    case "EPERM":
      return `permission denied: ${path}`;
    case "EEXIST":
      return `${path} already exists`;
    default:
      return `${path}: ${messageOf(error)}`;
  }
}

/**
 * A file's text, or its first (`head`) or last (`tail`) lines, at most MAX_RETURN_BYTES of
 * it. A binary file is refused: as text it would be replacement characters, three bytes each.
 */
export async function readTextFile(
  absolute: string,
  opts: { head?: number; tail?: number },
): Promise<string> {
  const file = await open(absolute, "r");
  try {
    const { size } = await file.stat();
    const whole = opts.head !== undefined || opts.tail !== undefined;
    if (whole && size > MAX_READ_BYTES) {
      throw new ToolFailure(
        `file is ${size} bytes, more than the ${MAX_READ_BYTES} bytes this tool reads for head or tail; read it without them for its first ${MAX_RETURN_BYTES} bytes`,
      );
    }
    // Read to the end, whatever the size says (a file may tell 0 and have text, as /proc's do);
    // a plain read stops one byte past the cap (where the cut falls in a character).
    const { bytes, total } = whole
      ? await file.readFile().then((all) => ({ bytes: all, total: all.length }))
      : await readHead(file, size, MAX_RETURN_BYTES + 1);
    if (bytes.subarray(0, BINARY_PROBE_BYTES).includes(0)) {
      throw new ToolFailure(
        `the file looks binary (${total} bytes, with NUL bytes): this tool reads text files`,
      );
    }
    // The cut's line is the redactor's (util/cut-marks.ts): it must stay as it is.
    if (!whole) return capHeadBytes(bytes, MAX_RETURN_BYTES, total);
    const lines = bytes.toString("utf8").split("\n");
    if (lines[lines.length - 1] === "") lines.pop();
    if (opts.head !== undefined)
      return capHead(lines.slice(0, opts.head).join("\n"), MAX_RETURN_BYTES);
    const tail = opts.tail ?? 0;
    return tail === 0
      ? ""
      : capTail(lines.slice(-tail).join("\n"), MAX_RETURN_BYTES, "the lines asked for");
  } finally {
    await file.close();
  }
}

/** Bytes read at once where a file's size says nothing (it tells 0, as procfs files do). */
const CHUNK_BYTES = 64 * 1024;

/**
 * The first `length` bytes of `file` (all of it when it ends before), read to its end rather
 * than to the `size` it tells, and its whole length (`total`): counted to the end where the
 * size fell short, the size itself otherwise (a big file is not read past what is kept).
 */
async function readHead(
  file: FileHandle,
  size: number,
  length: number,
): Promise<{ bytes: Buffer; total: number }> {
  const chunks: Buffer[] = [];
  let filled = 0;
  while (filled < length) {
    const buffer = Buffer.allocUnsafe(
      Math.min(length - filled, Math.max(size + 1 - filled, CHUNK_BYTES)),
    );
    const { bytesRead } = await file.read(buffer, 0, buffer.length, null);
    if (bytesRead === 0) return { bytes: Buffer.concat(chunks), total: filled };
    chunks.push(buffer.subarray(0, bytesRead));
    filled += bytesRead;
  }
  let total = Math.max(size, filled);
  if (size < filled) {
    const rest = Buffer.allocUnsafe(CHUNK_BYTES);
    for (;;) {
      const { bytesRead } = await file.read(rest, 0, rest.length, null);
      if (bytesRead === 0) break;
      total += bytesRead;
    }
  }
  return { bytes: Buffer.concat(chunks), total };
}

export async function listDirectory(absolute: string): Promise<string> {
  const entries = await readdir(absolute, { withFileTypes: true });
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return entries.map((e) => `${e.isDirectory() ? "[DIR]" : "[FILE]"} ${e.name}`).join("\n");
}

/**
 * Walks `start` (already confined) and returns matching paths relative to `root`. Symlinked
 * directories are not descended into, so the walk never leaves the workspace; entries
 * matching an exclude pattern are skipped with everything below them.
 */
export async function searchFiles(
  root: string,
  start: string,
  pattern: string,
  excludePatterns: readonly string[],
): Promise<{ matches: string[]; truncated: boolean }> {
  const matches: string[] = [];
  const isMatch = globMatcher(pattern);
  const excluders = excludePatterns.map(globMatcher);
  let truncated = false;

  const walk = async (dir: string): Promise<void> => {
    let entries: Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      return; // unreadable directories are skipped, as `find` would after a warning
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      if (truncated) return;
      const full = join(dir, entry.name);
      const fromStart = relative(start, full);
      if (excluders.some((excluded) => excluded(fromStart))) continue;
      if (isMatch(fromStart)) {
        if (matches.length >= MAX_SEARCH_RESULTS) {
          truncated = true;
          return;
        }
        matches.push(relative(root, full));
      }
      if (entry.isDirectory()) await walk(full);
    }
  };
  await walk(start);
  return { matches, truncated };
}
