import { isUtf8 } from "node:buffer";
import type { GitResult } from "./git";

/** A diff as git printed it, cut after `capBytes`. */
export interface CappedText {
  text: string;
  bytes: number;
  truncated: boolean;
  /**
   * git printed bytes that are not UTF-8 (a file named or written in another encoding): `text`
   * has U+FFFD in their place, and `git apply` would make other files of it (see
   * diffAsText in snapshot-diffs.ts).
   */
  lossy?: true;
}

const lossy = (kept: Buffer) => (isUtf8(kept) ? {} : { lossy: true as const });

/** A change's file list, `--stat` and patch in one output (see parseChangeOutput). */
export const CHANGE_DIFF_OPTIONS = [
  "--numstat",
  "-z",
  "--stat=200",
  "--binary",
  "--no-color",
  "--no-ext-diff",
  "-p",
] as const;

/** The run's change between two snapshots: its files, git's `--stat` and the patch. */
export interface SnapshotChange {
  files: string[];
  stat: string;
  patch: CappedText;
}

/** Cuts a diff at its last complete line when it was truncated. */
export function capped(result: GitResult): CappedText {
  if (!result.truncated)
    return {
      text: result.stdout,
      bytes: result.stdoutBytes,
      truncated: false,
      ...lossy(result.stdoutRaw),
    };
  const cut = result.stdout.lastIndexOf("\n");
  const keptBytes = result.stdoutRaw.lastIndexOf(0x0a) + 1;
  return {
    text: cut < 0 ? "" : result.stdout.slice(0, cut + 1),
    bytes: result.stdoutBytes,
    truncated: true,
    ...lossy(result.stdoutRaw.subarray(0, keptBytes)),
  };
}

/**
 * A diff of `bytes` bytes whose first bytes are `head`, kept up to `capBytes` and cut at its
 * last complete line — what `git diff` with that cap gives (see `capped`).
 */
export function capDiff(head: Buffer, bytes: number, capBytes: number): CappedText {
  if (bytes <= capBytes && head.length >= bytes)
    return { text: head.toString("utf8"), bytes, truncated: false, ...lossy(head) };
  const kept = head.subarray(0, Math.min(capBytes, head.length));
  const cut = kept.lastIndexOf(0x0a);
  return {
    text: cut < 0 ? "" : kept.toString("utf8", 0, cut + 1),
    bytes,
    truncated: true,
    ...lossy(kept.subarray(0, cut + 1)),
  };
}

/**
 * One `git diff --numstat -z --stat=200 --binary A B` prints, in this order: a numstat record
 * per file (`ADDED\tDELETED\tPATH\0`, or `ADDED\tDELETED\t\0OLD\0NEW\0` for a rename), the
 * `--stat` block, a NUL, then the patch — the same bytes `git diff --stat=200` and
 * `git diff --binary` print on their own. Reading the three from one process saves two git
 * spawns per snapshot.
 */
export interface ChangeOutput {
  /** Paths the change touches (both sides of a rename), in git's byte order. */
  files: string[];
  stat: string;
  /** Where the patch starts in git's output. */
  patchOffset: number;
}

const TAB = 0x09;
const NUL = 0x00;

/** The end of `ADDED\tDELETED\t` at `at` (digits or `-` each), or -1 when there is none. */
function numstatHead(b: Buffer, at: number): number {
  let i = at;
  for (let field = 0; field < 2; field++) {
    const start = i;
    if (b[i] === 0x2d) i++;
    else while (i < b.length && b[i]! >= 0x30 && b[i]! <= 0x39) i++;
    if (i === start || b[i] !== TAB) return -1;
    i++;
  }
  return i;
}

/**
 * Splits the kept output. Returns null when it is cut before the patch begins (the output was
 * capped inside the file list or the stat): the caller then asks git for each part alone.
 */
export function parseChangeOutput(out: Buffer, truncated: boolean): ChangeOutput | null {
  const names = new Set<string>();
  let i = 0;
  for (;;) {
    const head = numstatHead(out, i);
    if (head === -1) break;
    if (out[head] === NUL) {
      const oldEnd = out.indexOf(NUL, head + 1);
      const newEnd = oldEnd === -1 ? -1 : out.indexOf(NUL, oldEnd + 1);
      if (newEnd === -1) return null;
      names.add(out.toString("utf8", head + 1, oldEnd));
      names.add(out.toString("utf8", oldEnd + 1, newEnd));
      i = newEnd + 1;
    } else {
      const end = out.indexOf(NUL, head);
      if (end === -1) return null;
      names.add(out.toString("utf8", head, end));
      i = end + 1;
    }
  }
  const separator = out.indexOf(NUL, i);
  if (separator === -1 && truncated) return null;
  const statEnd = separator === -1 ? out.length : separator;
  const files = [...names].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  return {
    files,
    stat: out.toString("utf8", i, statEnd),
    patchOffset: separator === -1 ? out.length : separator + 1,
  };
}

/**
 * `git diff-tree --stdin` prints each input line (`TREE_A TREE_B`) before that pair's diff
 * (an empty one for equal trees). Splits its output at the pairs' lines, in their order: each
 * part is a pair's output after its line, and `offset` where it starts. Such a line cannot
 * occur inside a diff (no patch, stat or binary line is two object ids and a space), so the
 * split is exact. Returns null when a pair's line is not in the kept output (it was capped
 * before).
 */
export function splitPairs(
  out: Buffer,
  lines: readonly string[],
): { output: Buffer; offset: number }[] | null {
  const [first, ...rest] = lines;
  if (first === undefined) return [];
  const head = Buffer.from(`${first}\n`);
  if (!out.subarray(0, head.length).equals(head)) return null;
  const parts: { output: Buffer; offset: number }[] = [];
  let offset = head.length;
  for (const line of rest) {
    const marker = out.indexOf(`\n${line}\n`, offset - 1);
    if (marker === -1) return null;
    parts.push({ output: out.subarray(offset, marker + 1), offset });
    offset = marker + line.length + 2;
  }
  parts.push({ output: out.subarray(offset), offset });
  return parts;
}
