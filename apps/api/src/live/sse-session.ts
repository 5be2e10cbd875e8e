import type { Context } from "hono";
import { type SSEStreamingApi, streamSSE } from "hono/streaming";

export interface LiveOptions {
  /** How often a stream reads the database for news. @defaultValue 250 */
  pollMs: number;
  /** A `: ping` comment after this long without a write keeps proxies and clients from timing out. @defaultValue 15000 */
  heartbeatMs: number;
}

export const LIVE_DEFAULTS: LiveOptions = { pollMs: 250, heartbeatMs: 15_000 };

/**
 * An SSE response served by `body` through a session (below), which lets go of the server's
 * shutdown signal once the response ends, however it ends.
 */
export function streamSession(
  c: Context,
  opts: LiveOptions,
  shutdown: AbortSignal | undefined,
  body: (session: SseSession) => Promise<void>,
): Response {
  return streamSSE(c, async (stream) => {
    const session = new SseSession(stream, opts, shutdown);
    try {
      await body(session);
    } finally {
      session.close();
    }
  });
}

/**
 * One open SSE response: writes messages, pings while idle and sleeps until the next poll,
 * waking at once when the client goes away or `wake()` is called. `close()` when done
 * (streamSession does).
 */
export class SseSession {
  private lastWrite = Date.now();
  private wakeUp: (() => void) | null = null;
  private readonly onShutdown = () => this.wake();

  constructor(
    private readonly stream: SSEStreamingApi,
    private readonly opts: LiveOptions,
    /** Aborted when the server shuts down: open streams end so that it can. */
    private readonly shutdown?: AbortSignal,
  ) {
    stream.onAbort(() => this.wake());
    shutdown?.addEventListener("abort", this.onShutdown, { once: true });
  }

  /** The response has ended: the server's shutdown signal no longer holds on to it. */
  close(): void {
    this.shutdown?.removeEventListener("abort", this.onShutdown);
  }

  get open(): boolean {
    return !this.stream.aborted && !this.stream.closed && !this.shutdown?.aborted;
  }

  /** Tells clients how soon to reconnect and gets the response headers on their way. */
  async start(): Promise<void> {
    await this.stream.write("retry: 2000\n\n");
    this.lastWrite = Date.now();
  }

  /** One message: `id` (when given), `event`, `data` — in that order, one line each. */
  async send(event: string, data: unknown, id?: number): Promise<void> {
    // JSON.stringify escapes line breaks: the data is one line.
    const head = id === undefined ? "" : `id: ${id}\n`;
    await this.stream.write(`${head}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    this.lastWrite = Date.now();
  }

  /** Waits `pollMs` (or until woken), then pings if nothing was written for `heartbeatMs`. */
  async idle(): Promise<void> {
    if (!this.open) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, this.opts.pollMs);
      const self = this;
      function done() {
        clearTimeout(timer);
        self.wakeUp = null;
        resolve();
      }
      this.wakeUp = done;
    });
    if (this.open && Date.now() - this.lastWrite >= this.opts.heartbeatMs) {
      await this.stream.write(": ping\n\n");
      this.lastWrite = Date.now();
    }
  }

  wake(): void {
    this.wakeUp?.();
  }
}
