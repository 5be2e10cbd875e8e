/** One message of a text/event-stream, or a comment line (`: ping`). */
export interface SseMessage {
  event?: string;
  data?: string;
  id?: string;
  retry?: string;
  comment?: string;
}

/**
 * A strict reader of a text/event-stream body for tests: yields every message and comment in
 * order, and `null` once the server has closed the stream.
 */
export class SseReader {
  private readonly reader: ReadableStreamDefaultReader<string>;
  private buffer = "";
  private readonly queue: SseMessage[] = [];
  private current: SseMessage = {};
  private ended = false;

  constructor(body: ReadableStream<Uint8Array>) {
    this.reader = body.pipeThrough(new TextDecoderStream()).getReader();
  }

  /** The next message or comment; `null` when the stream has ended. */
  async next(): Promise<SseMessage | null> {
    while (this.queue.length === 0) {
      if (this.ended) return null;
      const { done, value } = await this.reader.read();
      if (done) {
        this.ended = true;
        continue;
      }
      this.feed(value);
    }
    return this.queue.shift() ?? null;
  }

  /** Messages with data until `stop` returns true for one (included) or the stream ends. */
  async until(stop: (m: SseMessage) => boolean): Promise<SseMessage[]> {
    const out: SseMessage[] = [];
    for (let m = await this.next(); m; m = await this.next()) {
      if (m.data === undefined) continue; // a comment, or only `retry:`
      out.push(m);
      if (stop(m)) break;
    }
    return out;
  }

  /** Every remaining message (not comments) until the server ends the stream. */
  async rest(): Promise<SseMessage[]> {
    return this.until(() => false);
  }

  async cancel(): Promise<void> {
    await this.reader.cancel().catch(() => {});
  }

  private feed(text: string): void {
    this.buffer += text;
    const lines = this.buffer.split(/\r\n|\r|\n/);
    this.buffer = lines.pop() ?? "";
    for (const line of lines) {
      if (line === "") {
        if (Object.keys(this.current).length > 0) this.queue.push(this.current);
        this.current = {};
      } else if (line.startsWith(":")) {
        this.queue.push({ comment: line.slice(1).trim() });
      } else {
        const colon = line.indexOf(":");
        const field = colon === -1 ? line : line.slice(0, colon);
        const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "data")
          this.current.data =
            this.current.data === undefined ? value : `${this.current.data}\n${value}`;
        else if (field === "event" || field === "id" || field === "retry")
          this.current[field] = value;
        else
          throw new Error(
            `unexpected SSE field ${JSON.stringify(field)} in line ${JSON.stringify(line)}`,
          );
      }
    }
  }
}

/** The event JSON of a message. */
export const payload = (m: SseMessage) => JSON.parse(m.data ?? "null");
