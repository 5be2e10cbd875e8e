import { StringDecoder } from "node:string_decoder";
import { forPrompt } from "../util/for-prompt";

const OPEN = "<promise>";
/** What follows the line's last `<promise>`, when it ends the line: `TEXT</promise>` and blanks. */
const TAG_REST = /^(.*)<\/promise>\s*$/;

/**
 * A line longer than this is looked at by its end only: it cannot be a copy of a line of the
 * prompt (whose lines are shorter), and the promise is at its end anyway.
 */
const LINE_KEPT_CHARS = 256 * 1024;

/**
 * Finds the completion promise in an agent's output as the output streams by, the whole of it
 * (not only the tail that is stored: a promise followed by a long summary still counts).
 *
 * The promise is `<promise>TEXT</promise>` (TEXT trimmed, exactly the run's) ending a line:
 * only blanks after it on that line, anything before (`All done. <promise>DONE</promise>`).
 * A tag inside a sentence is a mention, not a promise: the prompt's own "print
 * <promise>DONE</promise> on its own line", an agent saying what it will print. A line that is
 * a line of the prompt, copied (an agent that echoes its prompt, `tee`), does not count either.
 * Terminal colours and cursor moves are no text: they are left out before the line is read.
 */
export class CompletionPromiseScanner {
  private readonly decoder = new StringDecoder("utf8");
  private readonly promptLines: ReadonlySet<string>;
  /** The line being read (its end, when it is longer than LINE_KEPT_CHARS). */
  private line = "";
  private lineCut = false;
  private seen = false;
  private otherText: string | null = null;

  constructor(
    private readonly promise: string,
    prompt: string,
  ) {
    this.promptLines = new Set(
      prompt
        .split("\n")
        .filter((l) => l.includes("</promise>"))
        .map((l) => l.trim()),
    );
  }

  /** Whether the promise came in what was written so far (complete lines, and the last one). */
  get found(): boolean {
    return this.seen || this.isPromise(this.line, this.lineCut);
  }

  /**
   * The text of the last tag that ended a line as a promise would, but was not the run's
   * (`<promise>COMPLETE</promise>` for DONE): the feedback names it. At most 200 characters.
   */
  get other(): string | null {
    return this.found ? null : this.otherText;
  }

  write(chunk: Buffer | string): void {
    if (this.seen) return;
    const text = typeof chunk === "string" ? chunk : this.decoder.write(chunk);
    let start = 0;
    for (;;) {
      const newline = text.indexOf("\n", start);
      if (newline === -1) {
        this.append(text.slice(start));
        return;
      }
      this.append(text.slice(start, newline));
      if (this.isPromise(this.line, this.lineCut)) {
        this.seen = true;
        this.line = "";
        return;
      }
      this.line = "";
      this.lineCut = false;
      start = newline + 1;
    }
  }

  private append(text: string): void {
    if (text.length === 0) return;
    this.line += text;
    // Cut only once it is twice the length kept: each character is copied a bounded number of
    // times, however long the line (a command may write hundreds of megabytes without a newline).
    if (this.line.length > 2 * LINE_KEPT_CHARS) {
      this.line = this.line.slice(-LINE_KEPT_CHARS);
      this.lineCut = true;
    }
  }

  private isPromise(raw: string, cut: boolean): boolean {
    if (!raw.includes("promise>")) return false;
    // As a terminal shows it: coloured (`\x1b[32m<promise>DONE</promise>\x1b[0m`) counts.
    const line = forPrompt(raw);
    const open = line.lastIndexOf(OPEN);
    if (open === -1) return false;
    const match = TAG_REST.exec(line.slice(open + OPEN.length));
    if (!match) return false;
    const given = match[1]?.trim() ?? "";
    const ownLine = cut || !this.promptLines.has(line.trim());
    if (given !== this.promise) {
      if (ownLine && given !== "") this.otherText = given.slice(0, 200);
      return false;
    }
    return ownLine;
  }
}
