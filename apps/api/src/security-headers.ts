import type { MiddlewareHandler } from "hono";
import { secureHeaders } from "hono/secure-headers";

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
 * in its URL). Not HSTS (TLS ends at a proxy, which sets it) nor Cross-Origin-Resource-Policy
 * (the API serves the origins in CORS_ORIGINS). Pages (HTML) also carry the content security
 * policy above and may not be framed; what is not a page has nothing to click.
 */
export function securityHeaders(): MiddlewareHandler {
  const common = secureHeaders({
    strictTransportSecurity: false,
    crossOriginResourcePolicy: false,
    xFrameOptions: false,
  });
  return async (c, next) => {
    await common(c, async () => {
      await next();
      if (c.res.headers.get("content-type")?.startsWith("text/html")) {
        c.res.headers.set("Content-Security-Policy", PAGE_POLICY);
        c.res.headers.set("X-Frame-Options", "DENY");
      }
    });
  };
}
