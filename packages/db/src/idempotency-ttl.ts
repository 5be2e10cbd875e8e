/** How long an `Idempotency-Key` is remembered (its run then kept at least as long). */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
