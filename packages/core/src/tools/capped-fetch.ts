import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";

/** The most of one reply (a JSON body, or one event of a stream) read from an HTTP MCP server. */
export const MAX_HTTP_REPLY_BYTES = 10 * 1024 * 1024;

/** A server's reply went past the cap: what was read is dropped, the rest is not read. */
export class ReplyTooLargeError extends Error {
  override readonly name = "ReplyTooLargeError";
}

const LF = 0x0a;
const CR = 0x0d;

/**
 * `fetch` for a Streamable HTTP MCP transport that reads no more than `capBytes` of one
 * message: a JSON reply is cut at `capBytes` of body, an event stream (`text/event-stream`)
 * at `capBytes` since its last event ended (a blank line), so a long-lived stream of small
 * events goes on. The SDK reads a reply whole into memory: a run's server (any url the run
 * names) answering with gigabytes took the worker's memory with it; the stdio transport has
 * a limit of its own.
 */
export function cappedFetch(
  capBytes = MAX_HTTP_REPLY_BYTES,
  base: FetchLike = fetch,
  /** Told of each reply cut (`events`: an event stream's), as the reply's reader is. */
  onTooLarge?: (error: ReplyTooLargeError, events: boolean) => void,
): FetchLike {
  return async (url, init) => {
    const response = await base(url, init);
    if (response.body === null) return response;
    const events = (response.headers.get("content-type") ?? "").includes("text/event-stream");
    let sinceBoundary = 0;
    // The last byte that was not a CR was a line feed: a blank line (LF LF, or CRLF CRLF)
    // may span two chunks.
    let afterLf = false;
    const counter = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        let largest = 0;
        if (events) {
          for (let i = 0; i < chunk.length; i++) {
            const byte = chunk[i];
            if (byte === LF) {
              largest = Math.max(largest, sinceBoundary + 1);
              sinceBoundary = afterLf ? 0 : sinceBoundary + 1;
              afterLf = true;
            } else {
              sinceBoundary += 1;
              if (byte !== CR) afterLf = false;
            }
          }
        } else {
          sinceBoundary += chunk.length;
        }
        if (Math.max(largest, sinceBoundary) > capBytes) {
          const error = new ReplyTooLargeError(
            `the server's reply passed ${capBytes} bytes (a message of an MCP server is at most that): not read further`,
          );
          controller.error(error);
          onTooLarge?.(error, events);
          return;
        }
        controller.enqueue(chunk);
      },
    });
    return new Response(response.body.pipeThrough(counter), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}
