import type { HttpBindings } from "@hono/node-server";
import type { MiddlewareHandler } from "hono";

/**
 * What a page of the dashboard may load: its own scripts, styles and API (the login form
 * posts to it too), images from itself and `data:` (its icon); nothing else, and no frame
 * may hold it (clickjacking).
 */
export const PAGE_POLICY = [
  "default-src 'self'",
  "img-src 'self' data:",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

/**
 * Headers on every answer: no MIME sniffing, no referrer leaving the dashboard (a run's id is
 * in its URL) — Hono's `secureHeaders` defaults, less HSTS (TLS ends at a proxy, which sets
 * it), Cross-Origin-Resource-Policy (the API serves the origins in CORS_ORIGINS) and
 * X-Frame-Options (pages only: what is not a page has nothing to click).
 */
export const EVERY_ANSWER: ReadonlyArray<readonly [name: string, value: string]> = [
  ["Cross-Origin-Opener-Policy", "same-origin"],
  ["Origin-Agent-Cluster", "?1"],
  ["Referrer-Policy", "no-referrer"],
  ["X-Content-Type-Options", "nosniff"],
  ["X-DNS-Prefetch-Control", "off"],
  ["X-Download-Options", "noopen"],
  ["X-Permitted-Cross-Domain-Policies", "none"],
  ["X-XSS-Protection", "0"],
];

/** What a page (HTML) carries besides: its content security policy; no frame may hold it. */
export const PAGE_HEADERS = {
  "Content-Security-Policy": PAGE_POLICY,
  "X-Frame-Options": "DENY",
} as const;

/**
 * Sets EVERY_ANSWER's headers. Served by @hono/node-server (`looprun api`), on Node's response
 * before the handler runs: Node merges them with the answer's own as it writes the head, and
 * the answer keeps the plain object Hono made its headers from. Setting them on the answer
 * (as Hono's `secureHeaders` does) made a WHATWG `Headers` of every answer's and copied it out
 * again (bench, submit path: ~8% of a fresh API's main thread per submit). Without a Node
 * response (`app.request()`), on the answer.
 */
export function securityHeaders(): MiddlewareHandler {
  return async (c, next) => {
    const outgoing = (c.env as Partial<HttpBindings> | undefined)?.outgoing;
    if (outgoing) {
      for (const [name, value] of EVERY_ANSWER) outgoing.setHeader(name, value);
      await next();
      return;
    }
    await next();
    for (const [name, value] of EVERY_ANSWER) c.res.headers.set(name, value);
  };
}
