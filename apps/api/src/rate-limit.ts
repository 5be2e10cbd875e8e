import type { Context, MiddlewareHandler } from "hono";
import { ApiError } from "./errors";

export interface RateLimitOptions {
  /** Requests a client may make per window. */
  limit: number;
  /** @defaultValue 60000 */
  windowMs?: number;
  /** Who the client is (its address); requests without one share a bucket. */
  clientKey: (c: Context) => string;
  /** @defaultValue Date.now */
  now?: () => number;
}

/** A fixed-window limit per client: over it, `429 rate_limited` with Retry-After. */
export function rateLimit(opts: RateLimitOptions): MiddlewareHandler {
  const windowMs = opts.windowMs ?? 60_000;
  const now = opts.now ?? Date.now;
  const windows = new Map<string, { start: number; count: number }>();
  let lastSweep = now();
  return async (c, next) => {
    const t = now();
    if (t - lastSweep > windowMs) {
      for (const [key, w] of windows) if (t - w.start >= windowMs) windows.delete(key);
      lastSweep = t;
    }
    const key = opts.clientKey(c);
    let w = windows.get(key);
    if (!w || t - w.start >= windowMs) {
      w = { start: t, count: 0 };
      windows.set(key, w);
    }
    w.count += 1;
    if (w.count > opts.limit) {
      const retryAfter = Math.max(1, Math.ceil((w.start + windowMs - t) / 1000));
      c.header("Retry-After", String(retryAfter));
      throw new ApiError(
        429,
        "rate_limited",
        `too many requests: at most ${opts.limit} per ${windowMs / 1000} s`,
        {
          retryAfterSeconds: retryAfter,
        },
      );
    }
    await next();
  };
}
