import { constants } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { capHeadBytes, capTailBytes } from "../util/cut-marks";
import { ToolFailure } from "./errors";

/**
 * Bytes of text a read returns at most (a line says how much was left out). The MCP message
 * must stay well under the SDK stdio client's 10 MiB limit — a larger one closes the
 * connection and every later call fails — and JSON may escape a byte into six.
 */
export const MAX_RETURN_BYTES = 1024 * 1024;
/**
 * The most a `tail` reads into memory from a file that does not tell its size (procfs tells 0):
 * it cannot be read from its end.
 */
export const MAX_UNSIZED_TAIL_BYTES = 16 * 1024 * 1024;
/** Bytes looked at for a NUL byte, which says a file is binary (as git decides). */
const BINARY_PROBE_BYTES = 8000;
/** Bytes read at once while looking for line ends, or where a file's size says nothing. */
const CHUNK_BYTES = 64 * 1024;
const NEWLINE = 0x0a;

/**
 * A file's text, or its first (`head`) or last (`tail`) lines — the lines as `split("\n")`
 * gives them, a last newline ending the last line — at most MAX_RETURN_BYTES of it, with the
 * cut's line (util/cut-marks.ts) where it is longer. Only what is returned is kept in memory:
 * a plain read reads no further than that; `head` reads on to its last line's end, counting;
 * `tail` reads back from the file's end to its first line's start. A binary file is refused:
 * as text it would be replacement characters, three bytes each.
 */
export async function readTextFile(
  absolute: string,
  opts: { head?: number; tail?: number },
  // O_NONBLOCK: a FIFO would hold the open (and the server) until something wrote into it.
  openFile: (absolute: string) => Promise<FileHandle> = (at) =>
    open(at, constants.O_RDONLY | constants.O_NONBLOCK),
): Promise<string> {
  const file = await openFile(absolute);
  try {
    const stats = await file.stat();
    // A directory fails at its first read, as it did (EISDIR, said by describeFsError).
    if (!stats.isFile() && !stats.isDirectory()) {
      throw new ToolFailure(
        `it is not a regular file (${stats.isFIFO() ? "a FIFO" : "a device or a socket"}): this tool reads files`,
      );
    }
    const { size } = stats;
    if (opts.tail === undefined) return await readHead(file, size, opts.head);
    const fromEnd = await readTail(positionalReader(file), size, opts.tail);
    if (fromEnd !== null) return fromEnd;
    // No end where its size says (procfs tells 0; sysfs tells 4096 for a few bytes; a log may
    // be cut short meanwhile): read it all, and back from the end of that.
    const bytes = await readUnsized(file);
    const inMemory: ReadAt = async (at, length) => bytes.subarray(at, at + length);
    return (await readTail(inMemory, bytes.length, opts.tail)) ?? "";
  } finally {
    await file.close();
  }
}

function refuseBinary(start: Buffer): void {
  if (start.subarray(0, BINARY_PROBE_BYTES).includes(0)) {
    throw new ToolFailure(
      `the file looks binary (a NUL byte in its first ${BINARY_PROBE_BYTES} bytes): this tool reads text files`,
    );
  }
}

/**
 * From the start: the whole file (`lines` undefined) or its first `lines` lines, capped. Reads
 * on to the file's end rather than to the `size` it tells (procfs tells 0); keeps what it may
 * return and counts the rest — for the whole file, only as far as `size` tells it.
 */
async function readHead(
  file: FileHandle,
  size: number,
  lines: number | undefined,
): Promise<string> {
  const keep = MAX_RETURN_BYTES + 1;
  const kept: Buffer[] = [];
  let keptBytes = 0;
  let position = 0;
  let seen = 0;
  let lastByte = -1;
  /** Where the text asked for ends (exclusive), once known. */
  let end: number | undefined;
  while (end === undefined) {
    // A plain read of a file whose size is known stops once it has what it keeps.
    if (lines === undefined && keptBytes >= keep && position <= size) {
      end = size;
      break;
    }
    const length = position < size ? Math.min(CHUNK_BYTES, size + 1 - position) : CHUNK_BYTES;
    const chunk = Buffer.allocUnsafe(length);
    const { bytesRead } = await file.read(chunk, 0, length, null);
    if (bytesRead === 0) {
      // The file ended first: without its last newline, which ends a line and starts none.
      end = lines !== undefined && lastByte === NEWLINE ? position - 1 : position;
      break;
    }
    const read = chunk.subarray(0, bytesRead);
    if (position < BINARY_PROBE_BYTES)
      refuseBinary(read.subarray(0, BINARY_PROBE_BYTES - position));
    if (lines === 0) end = 0;
    for (let i = -1; lines !== undefined && seen < lines; ) {
      i = read.indexOf(NEWLINE, i + 1);
      if (i === -1) break;
      if (++seen === lines) end = position + i;
    }
    const piece = read.subarray(0, Math.max(0, keep - keptBytes));
    if (piece.length > 0) kept.push(piece);
    keptBytes += piece.length;
    lastByte = read[bytesRead - 1] ?? -1;
    position += bytesRead;
  }
  const bytes = Buffer.concat(kept).subarray(0, end);
  // The cut's line is the redactor's (util/cut-marks.ts): it must stay as it is.
  return capHeadBytes(bytes, MAX_RETURN_BYTES, end);
}

/** A whole file that tells no size, up to MAX_UNSIZED_TAIL_BYTES. */
async function readUnsized(file: FileHandle): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for (;;) {
    const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
    const { bytesRead } = await file.read(chunk, 0, CHUNK_BYTES, null);
    if (bytesRead === 0) return Buffer.concat(chunks);
    chunks.push(chunk.subarray(0, bytesRead));
    total += bytesRead;
    if (total > MAX_UNSIZED_TAIL_BYTES) {
      throw new ToolFailure(
        `the file tells no size and is more than ${MAX_UNSIZED_TAIL_BYTES} bytes, too long for tail: read it without tail for its first ${MAX_RETURN_BYTES} bytes`,
      );
    }
  }
}

/** `length` bytes from `at` (fewer where the source ends first). */
type ReadAt = (at: number, length: number) => Promise<Buffer>;

function positionalReader(file: FileHandle): ReadAt {
  return async (at, length) => {
    const buffer = Buffer.allocUnsafe(length);
    let filled = 0;
    while (filled < length) {
      const { bytesRead } = await file.read(buffer, filled, length - filled, at + filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return buffer.subarray(0, filled);
  };
}

/**
 * The last `lines` lines of the first `size` bytes of a source (a file growing meanwhile is
 * read as it was), capped: read back from the end in chunks to the first line's start, and
 * only the text kept read whole. Null when the source holds no byte at `size - 1`, or nothing.
 */
async function readTail(readAt: ReadAt, size: number, lines: number): Promise<string | null> {
  const last = size > 0 ? await readAt(size - 1, 1) : Buffer.alloc(0);
  if (last.length === 0) return null;
  refuseBinary(await readAt(0, Math.min(size, BINARY_PROBE_BYTES)));
  if (lines === 0) return "";
  const end = last[0] === NEWLINE ? size - 1 : size;
  let start = 0;
  let seen = 0;
  scan: for (let to = end; to > 0; ) {
    const from = Math.max(0, to - CHUNK_BYTES);
    const chunk = await readAt(from, to - from);
    for (let i = chunk.length; i > 0; ) {
      i = chunk.lastIndexOf(NEWLINE, i - 1);
      if (i === -1) break;
      if (++seen === lines) {
        start = from + i + 1;
        break scan;
      }
    }
    to = from;
  }
  const total = end - start;
  const kept = Math.min(total, MAX_RETURN_BYTES);
  return capTailBytes(
    await readAt(end - kept, kept),
    MAX_RETURN_BYTES,
    total,
    "the lines asked for",
  );
}
