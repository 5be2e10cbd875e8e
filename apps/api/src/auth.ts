import { createHash, timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { ApiError } from "./errors";

const digest = (s: string) => createHash("sha256").update(s).digest();

/** Requires `Authorization: Bearer <token>`, compared in constant time. */
export function bearerAuth(token: string): MiddlewareHandler {
  const expected = digest(token);
  return async (c, next) => {
    const header = c.req.header("authorization") ?? "";
    const match = /^Bearer (.+)$/i.exec(header);
    // Hashing first gives equal lengths, so timingSafeEqual never throws or leaks the length.
    if (!match?.[1] || !timingSafeEqual(digest(match[1]), expected)) {
      // The scheme the client must use (RFC 9110: a 401 names it).
      c.header("WWW-Authenticate", 'Bearer realm="looprun"');
      throw new ApiError(401, "unauthorized", "missing or invalid bearer token (API_TOKEN)");
    }
    await next();
  };
}
