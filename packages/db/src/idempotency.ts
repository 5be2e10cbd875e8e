import { createHash } from "node:crypto";

/** How long an `Idempotency-Key` is remembered (its run then kept at least as long). */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

/**
 * An `Idempotency-Key` as it is stored: its SHA-256 (hex). A client may use anything as its
 * key, a token included: the database never holds it as written.
 */
export function idempotencyKeyHash(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}
