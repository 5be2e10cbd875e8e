import { z } from "zod";

/**
 * A whole number setting, as the apps' env.ts parse it: decimal digits only, within `min` and
 * `max`. An empty value is no number (`PORT=` was port 0: any free port), nor are `0x4A00`,
 * `1e3` or `18904.0`, which a coercion to a number took.
 */
export const envInt = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .regex(/^\d+$/, "must be a whole number (decimal digits)")
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

/** The longest delay Node's timers keep (2³¹ − 1 ms): a longer one fires at once (after 1 ms). */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * A duration in milliseconds that a timer waits (a poll, a lease, a pass every N ms): at most
 * MAX_TIMER_MS — `setInterval` runs a longer one back to back, every millisecond.
 */
export const envMs = (min: number) => envInt(min, MAX_TIMER_MS);
