import type { Server } from "node:http";
import type { HttpBindings } from "@hono/node-server";
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { ApiError } from "./errors";

/**
 * Request bodies read straight from Node's `IncomingMessage` when the app is served by
 * @hono/node-server. Hono's own way (`c.req.text()`, and `bodyLimit` before it) builds a
 * WHATWG `Request` with a web stream over the same bytes for every request: at 20 submits in
 * flight that was a sixth of the API's CPU time, and the submit path's throughput went from
 * 0.71–0.76× to 1.00–1.13× the bare handler's without it (bench/RESULTS.md). Elsewhere (the
 * tests' `app.request()`) and for bodies of unknown length (chunked), Hono's way is kept.
 */

/** A body handed to Hono's `bodyLimit` (its stream read, replaced in `c.req`). */
const readByHono = new WeakSet<Context>();
const texts = new WeakMap<Context, Promise<string>>();

function incomingOf(c: Context): HttpBindings["incoming"] | undefined {
  return (c.env as Partial<HttpBindings> | undefined)?.incoming;
}

/** The largest request body the API reads (1 MiB) unless told otherwise. */
export const BODY_LIMIT_BYTES = 1024 * 1024;

const bodyTooLarge = (maxBytes: number) =>
  new ApiError(413, "payload_too_large", `the body is larger than ${maxBytes} bytes`);

/**
 * A client that asks before it sends a body (`Expect: 100-continue`, as curl does for large
 * ones) hears at once that one over `maxBytes` is refused (413), instead of being told to go on
 * (Node's default) and sending all of it first.
 */
export function refuseLargeBodiesEarly(server: Server, maxBytes: number): void {
  server.on("checkContinue", (req, res) => {
    if (Number(req.headers["content-length"]) > maxBytes) {
      res.writeHead(413, { "content-type": "application/json", connection: "close" });
      res.end(JSON.stringify(bodyTooLarge(maxBytes).toBody()));
      return;
    }
    res.writeContinue();
    server.emit("request", req, res);
  });
}

/** 413 `payload_too_large` for a body over `maxBytes`, before anything reads it. */
export function limitBody(maxBytes: number): MiddlewareHandler {
  const tooLarge = () => {
    throw bodyTooLarge(maxBytes);
  };
  const counted = bodyLimit({ maxSize: maxBytes, onError: tooLarge });
  return async (c, next) => {
    const incoming = incomingOf(c);
    if (incoming !== undefined) {
      const length = incoming.headers["content-length"];
      // With a length (and no chunking), Node's parser delivers exactly that many bytes.
      if (length !== undefined && incoming.headers["transfer-encoding"] === undefined) {
        if (Number(length) > maxBytes) tooLarge();
        return next();
      }
      if (c.req.method === "GET" || c.req.method === "HEAD") return next();
      readByHono.add(c);
    }
    return counted(c, next);
  };
}

/** The request's body as text (UTF-8, as `Request.text()` decodes it); read once per request. */
export function readBodyText(c: Context): Promise<string> {
  let text = texts.get(c);
  if (text === undefined) {
    const incoming = incomingOf(c);
    text =
      incoming === undefined || readByHono.has(c)
        ? c.req.text()
        : (async () => {
            const chunks: Buffer[] = [];
            for await (const chunk of incoming) chunks.push(chunk as Buffer);
            return new TextDecoder().decode(Buffer.concat(chunks));
          })();
    texts.set(c, text);
  }
  return text;
}
