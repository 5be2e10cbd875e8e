/**
 * `new Date(ms).toISOString()`, for the many times an answer holds (a page of 1000 events has
 * 1000): the minute's `YYYY-MM-DDTHH:MM:` is kept from the call before — a run's times fall in
 * few minutes — and the seconds and milliseconds come from tables. toISOString took ~0.5 µs a
 * call, half a millisecond of such a page (bench/RESULTS.md, the twenty-seventh session).
 */
const SECONDS = Array.from({ length: 60 }, (_, s) => `${String(s).padStart(2, "0")}.`);
const MILLIS = Array.from({ length: 1000 }, (_, m) => `${String(m).padStart(3, "0")}Z`);
/** 10000-01-01T00:00:00.000Z: from there on toISOString writes six-digit years. */
const YEAR_10000 = 253_402_300_800_000;

let minuteKept = Number.NaN;
let prefixKept = "";

export function isoTime(ms: number): string {
  // Before 1970, past year 9999, a fraction of a millisecond, not a time: as Date writes it.
  if (!(Number.isInteger(ms) && ms >= 0 && ms < YEAR_10000)) return new Date(ms).toISOString();
  const minute = Math.floor(ms / 60_000);
  if (minute !== minuteKept) {
    prefixKept = new Date(minute * 60_000).toISOString().slice(0, 17);
    minuteKept = minute;
  }
  const rest = ms - minute * 60_000;
  const seconds = Math.floor(rest / 1000);
  return prefixKept + SECONDS[seconds] + MILLIS[rest - seconds * 1000];
}
