import { createHmac, timingSafeEqual } from "node:crypto";
import type { Context, MiddlewareHandler } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";

export const DASHBOARD_COOKIE = "looprun_dashboard";

/**
 * The dashboard cookie holds a value derived from API_TOKEN, not the token itself: it opens the
 * pages only and is no bearer token for /api (the pages' scripts send the token they keep in
 * localStorage). Changing API_TOKEN signs everyone out.
 */
export function cookieValue(token: string): string {
  return createHmac("sha256", token).update("looprun dashboard cookie v1").digest("hex");
}

const sameText = (a: string, b: string) => {
  const x = createHmac("sha256", "compare").update(a).digest();
  const y = createHmac("sha256", "compare").update(b).digest();
  return timingSafeEqual(x, y);
};

export const tokenMatches = (given: string, token: string) => sameText(given, token);

const THIS_SITE = "http://looprun.invalid";

/**
 * Only a path on this site, as a browser reads it: never `//host` or a URL elsewhere, nor
 * what a browser turns into one (it drops tabs and line breaks: `/<TAB>/evil.example` is
 * `//evil.example`; `/.//evil.example` is too once resolved). The path is given back as the
 * URL parser writes it (percent-encoded, so it fits in a Location header); anything else is `/`.
 */
export function safeNext(next: string | undefined): string {
  if (!next?.startsWith("/")) return "/";
  let url: URL;
  try {
    url = new URL(next, THIS_SITE);
  } catch {
    return "/";
  }
  if (url.origin !== THIS_SITE) return "/";
  const path = url.pathname + url.search + url.hash;
  if (path.startsWith("//") || path.startsWith("/\\")) return "/";
  return path;
}

/** With a token configured, a page needs the cookie; without it the visitor is sent to /login. */
export function requireDashboardCookie(token: string | undefined): MiddlewareHandler {
  return async (c, next) => {
    if (token === undefined) return next();
    const cookie = getCookie(c, DASHBOARD_COOKIE);
    if (cookie !== undefined && sameText(cookie, cookieValue(token))) return next();
    const url = new URL(c.req.url);
    return c.redirect(`/login?next=${encodeURIComponent(url.pathname + url.search)}`, 302);
  };
}

/**
 * Whether the visitor reached us over https: directly, or through a proxy that ended TLS and
 * says so (`X-Forwarded-Proto`). Trusting the header costs nothing: a client that lies gets a
 * cookie its browser only sends back over https.
 */
function overHttps(c: Context): boolean {
  const forwarded = c.req.header("x-forwarded-proto")?.split(",")[0]?.trim().toLowerCase();
  return new URL(c.req.url).protocol === "https:" || forwarded === "https";
}

export function signIn(c: Context, token: string): void {
  setCookie(c, DASHBOARD_COOKIE, cookieValue(token), {
    path: "/",
    httpOnly: true,
    sameSite: "Strict",
    secure: overHttps(c),
    maxAge: 30 * 24 * 3600,
  });
}

export function signOut(c: Context): void {
  deleteCookie(c, DASHBOARD_COOKIE, { path: "/" });
}
