/** Median with the range over the repetitions of one figure. */
export interface Summary {
  median: number;
  min: number;
  max: number;
  /** Every repetition's value, in the order measured. */
  values: number[];
}

function sorted(values: readonly number[]): number[] {
  return [...values].filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
}

/** The `p`-th percentile (0..100) by nearest rank; NaN for no values. */
export function percentile(values: readonly number[], p: number): number {
  const s = sorted(values);
  if (s.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))] ?? Number.NaN;
}

export function median(values: readonly number[]): number {
  const s = sorted(values);
  if (s.length === 0) return Number.NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] ?? Number.NaN) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
}

export function summarize(values: readonly number[]): Summary {
  const s = sorted(values);
  return {
    median: median(s),
    min: s[0] ?? Number.NaN,
    max: s.at(-1) ?? Number.NaN,
    values: [...values],
  };
}

/** Element-wise ratio of paired repetitions (`a[i] / b[i]`). */
export function pairedRatios(a: readonly number[], b: readonly number[]): number[] {
  return a.map((x, i) => x / (b[i] ?? Number.NaN));
}

export function mean(values: readonly number[]): number {
  const s = sorted(values);
  return s.length === 0 ? Number.NaN : s.reduce((n, v) => n + v, 0) / s.length;
}
