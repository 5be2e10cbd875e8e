import type { Context, MiddlewareHandler } from "hono";
import { ApiError } from "./errors";

const CHANGES_STATE = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/**
 * Refuses a request that changes something when a web page of another origin made the browser
 * send it (cross-site request forgery). Without `API_TOKEN` a local looprun trusts its local
 * clients, and a browser sends a form's or a `fetch`'s POST to 127.0.0.1 whatever page made it,
 * as `text/plain` or with no type at all: CORS hides the answer from the page, not the request
 * from the API, which would start the page's command. Browsers say where such a request comes
 * from (`Origin`, `Sec-Fetch-Site`); clients that are not browsers (curl, the CLI, scripts) send
 * neither and pass. Allowed origins: the API's own (the dashboard, as the `Host` or
 * `X-Forwarded-Host` header names it) and `CORS_ORIGINS`.
 */
export function refuseCrossSite(allowedOrigins: readonly string[]): MiddlewareHandler {
  const allowed = new Set(allowedOrigins);
  return async (c, next) => {
    if (CHANGES_STATE.has(c.req.method)) {
      const origin = c.req.header("origin");
      if (origin !== undefined) {
        if (!allowed.has(origin) && !isOwnOrigin(c, origin)) throw refused(origin);
      } else if (c.req.header("sec-fetch-site") === "cross-site") {
        throw refused("another site");
      }
    }
    await next();
  };
}

function isOwnOrigin(c: Context, origin: string): boolean {
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    return false; // "null": a sandboxed page or a file
  }
  const forwarded = c.req.header("x-forwarded-host")?.split(",")[0]?.trim();
  return host === c.req.header("host") || (forwarded !== undefined && host === forwarded);
}

const refused = (origin: string) =>
  new ApiError(
    403,
    "forbidden",
    `a request from a page of ${origin} is refused: only the dashboard and the origins in CORS_ORIGINS may send one from a browser`,
  );
