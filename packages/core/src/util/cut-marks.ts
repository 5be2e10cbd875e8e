/**
 * The lines a cap leaves where it cut text, in one place: a kept tail (a command's output, the
 * mistral agent's transcript) begins with a line that says what was omitted before it; a kept
 * head (a tool result) ends with a line that says how much was cut after it. The redactor
 * looks for them: text is capped before it is redacted, so a secret's piece may sit at a cut.
 */

/** What every kept tail begins with (a quick test before the pattern). */
const TAIL_PREFIX = "[… ";
const TAIL_LINE = /^\[… [^\n]*omitted …\]\n/;
/** What every kept head ends with. */
const HEAD_SUFFIX = " bytes cut …]";
const HEAD_LINE = /\n\[… \d+ of \d+ bytes cut …\]$/;

/** `tail` after the line that says what was omitted before it (`what`: "1234 bytes of earlier output"). */
export function keptTail(what: string, tail: string): string {
  return `${TAIL_PREFIX}${what} omitted …]\n${tail}`;
}

/** `head` before the line that says how many of `total` bytes were cut after it. */
export function keptHead(head: string, cut: number, total: number): string {
  return `${head}\n[… ${cut} of ${total}${HEAD_SUFFIX}`;
}

/** Whether `text` may carry a cut's line (cheap; `tailCut`/`headCut` tell for sure). */
export function mayBeCut(text: string): boolean {
  return text.startsWith(TAIL_PREFIX) || text.endsWith(HEAD_SUFFIX);
}

/** Where a kept tail's text starts (after its line), or undefined when `text` is none. */
export function tailCut(text: string): number | undefined {
  return TAIL_LINE.exec(text)?.[0].length;
}

/** Where a kept head's text ends (before its line), or undefined when `text` is none. */
export function headCut(text: string): number | undefined {
  return HEAD_LINE.exec(text)?.index;
}

/** Whether byte `i` of UTF-8 `bytes` continues a character (10xxxxxx) rather than starting one. */
function continues(bytes: Buffer, i: number): boolean {
  return ((bytes[i] ?? 0) & 0xc0) === 0x80;
}

/**
 * The first `capBytes` bytes of `text` (never splitting a character: no half of an emoji, no
 * lone surrogate) followed by the line that says how much was cut; `text` itself when it fits.
 * The line comes on top of the cap.
 */
export function capHead(text: string, capBytes: number): string {
  if (text.length <= capBytes / 3 || Buffer.byteLength(text, "utf8") <= capBytes) return text;
  return capHeadBytes(Buffer.from(text, "utf8"), capBytes);
}

/**
 * capHead of UTF-8 bytes (a file as read): only what is kept is decoded. `bytes` may be the
 * start of something longer, `total` bytes in all (a file read only as far as the cap).
 */
export function capHeadBytes(bytes: Buffer, capBytes: number, total = bytes.length): string {
  if (total <= capBytes) return bytes.toString("utf8");
  let end = Math.max(0, Math.min(capBytes, bytes.length));
  // A character has at most 3 continuation bytes: more are not UTF-8, and are cut anywhere.
  for (let k = 0; k < 3 && end > 0 && continues(bytes, end); k++) end--;
  return keptHead(bytes.subarray(0, end).toString("utf8"), total - end, total);
}

/**
 * The last `capBytes` bytes of `text` (never splitting a character) after the line that says
 * how many bytes of `what` ("earlier transcript") were omitted; `text` itself when it fits.
 */
export function capTail(text: string, capBytes: number, what: string): string {
  if (text.length <= capBytes / 3 || Buffer.byteLength(text, "utf8") <= capBytes) return text;
  // A kept tail cut again (a stored output in the feedback) says what both cuts omitted.
  const earlier = tailCut(text);
  const omittedBefore = earlier === undefined ? 0 : Number(OMITTED.exec(text)?.[1] ?? 0);
  const bytes = Buffer.from(earlier === undefined ? text : text.slice(earlier), "utf8");
  // Over the cap only by its line (which comes on top of a cap): kept as it is.
  if (bytes.length <= capBytes) return text;
  return capTailBytes(
    bytes.subarray(bytes.length - Math.max(0, capBytes)),
    capBytes,
    bytes.length,
    what,
    omittedBefore,
  );
}

/** The count of bytes a kept tail's line says were omitted. */
const OMITTED = /^\[… (\d+) bytes of /;

/**
 * capTail of UTF-8 bytes (a file's end as read): `bytes` is the end of something `total`
 * bytes long, at least its last `capBytes` bytes where it is longer than that.
 */
export function capTailBytes(
  bytes: Buffer,
  capBytes: number,
  total: number,
  what: string,
  /** Bytes omitted before `total` already (an earlier cut's). */
  omittedBefore = 0,
): string {
  if (total <= capBytes) return bytes.toString("utf8");
  let start = Math.max(0, bytes.length - Math.max(0, capBytes));
  for (let k = 0; k < 3 && start < bytes.length && continues(bytes, start); k++) start++;
  const omitted = omittedBefore + total - bytes.length + start;
  return keptTail(`${omitted} bytes of ${what}`, bytes.subarray(start).toString("utf8"));
}
