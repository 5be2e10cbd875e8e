import type { Context, MiddlewareHandler } from "hono";
import { ApiError } from "./errors";
import { isLoopbackName } from "./loopback";

// Without `API_TOKEN` a local looprun trusts its local clients. A web page the user opens is not
// one, but its browser is: two guards keep such a page from starting a run (a command) or
// reading runs. Clients that are not browsers (curl, the CLI, scripts) pass both.

const CHANGES_STATE = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/**
 * Refuses a request that changes something when a page of another origin made the browser
 * send it (cross-site request forgery): a form's or a `fetch`'s POST, as `text/plain` or with no
 * type at all, reaches the API whatever page made it (CORS hides the answer, not the request).
 * Browsers say where it comes from: `Sec-Fetch-Site` first (a page cannot set it), else
 * `Origin`, compared with the `Host` (or `X-Forwarded-Host`) the API is reached by. Allowed: the
 * API's own origin (the dashboard) and `allowedOrigins` (CORS_ORIGINS).
 */
export function refuseCrossSite(allowedOrigins: readonly string[]): MiddlewareHandler {
  const allowed = new Set(allowedOrigins.map(normalOrigin).filter((o) => o !== null));
  return async (c, next) => {
    if (CHANGES_STATE.has(c.req.method)) {
      const site = c.req.header("sec-fetch-site");
      const origin = c.req.header("origin");
      const normal = origin === undefined ? null : normalOrigin(origin);
      const allowedOrigin = normal !== null && allowed.has(normal);
      if (site !== undefined) {
        if (site !== "same-origin" && site !== "none" && !allowedOrigin) {
          throw refused(origin ?? `another ${site === "same-site" ? "origin" : "site"}`);
        }
      } else if (origin !== undefined && !allowedOrigin && !isOwnOrigin(c, origin)) {
        throw refused(origin);
      }
    }
    await next();
  };
}

/**
 * Answers only requests addressed to this machine by a loopback name or address (or to a host
 * of `allowedOrigins`), for an API without a token: a page whose own host name is made to
 * resolve to 127.0.0.1 (DNS rebinding) is same-origin to its browser, and could otherwise read
 * and post what it likes. Its requests carry its host name in `Host`.
 */
export function refuseForeignHost(allowedOrigins: readonly string[]): MiddlewareHandler {
  const allowedHosts = new Set(
    allowedOrigins.map((origin) => hostnameOf(origin)).filter((h): h is string => h !== null),
  );
  return async (c, next) => {
    const host = c.req.header("host");
    if (host !== undefined) {
      const name = hostnameOf(`http://${host}`);
      if (name === null || (!isLoopbackName(name) && !allowedHosts.has(name))) {
        throw new ApiError(
          403,
          "forbidden",
          `this looprun has no API_TOKEN and answers only to a loopback name (localhost, 127.0.0.1, [::1]), not to ${host}: set API_TOKEN, or list the origin in CORS_ORIGINS`,
        );
      }
    }
    await next();
  };
}

function isOwnOrigin(c: Context, origin: string): boolean {
  const own = normalOrigin(origin);
  if (own === null) return false;
  const scheme = own.slice(0, own.indexOf("://") + 3);
  const forwarded = c.req.header("x-forwarded-host")?.split(",")[0]?.trim();
  return [c.req.header("host"), forwarded].some(
    (host) => host !== undefined && host !== "" && normalOrigin(`${scheme}${host}`) === own,
  );
}

/**
 * An origin as URL writes it (lower case, without its scheme's default port), or null for one
 * that is none: "null" (a sandboxed page, a file) matches nothing.
 */
function normalOrigin(origin: string): string | null {
  try {
    const { origin: normal, protocol } = new URL(origin);
    return protocol === "http:" || protocol === "https:" ? normal : null;
  } catch {
    return null;
  }
}

function hostnameOf(url: string): string | null {
  try {
    return new URL(url).hostname;
  } catch {
    return null;
  }
}

const refused = (origin: string) =>
  new ApiError(
    403,
    "forbidden",
    `a request from a page of ${origin} is refused: only the dashboard and the origins in CORS_ORIGINS may send one from a browser`,
  );
