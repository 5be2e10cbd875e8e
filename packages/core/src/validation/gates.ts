import type { PartialSuccess, ValidationResult } from "../domain/run";

export interface GateReport extends PartialSuccess {
  /** At least `threshold` of the validation commands exited 0 (always true without commands). */
  ok: boolean;
}

/**
 * Applies `successThreshold`: validation passes when at least that fraction of its commands
 * ("gates") exit 0. `threshold` 1 means every command.
 */
export function gateReport(results: readonly ValidationResult[], threshold: number): GateReport {
  const total = results.length;
  const failed = results.filter((r) => r.exitCode !== 0).map((r) => r.command);
  const passed = total - failed.length;
  return { ok: passed >= gatesNeeded(total, threshold), passed, total, failed };
}

/** How many of `total` commands must exit 0 under `threshold`. */
export function gatesNeeded(total: number, threshold: number): number {
  // Rounding: 0.8 × 10 must ask for 8 gates, not 8.000000000000002.
  return Math.ceil(threshold * total - 1e-9);
}

/** "4 of 10 gates passed (failed: …); at least 7 must", for feedback when a threshold allows some to fail. */
export function describeShortfall(report: PartialSuccess, threshold: number): string | null {
  const needed = gatesNeeded(report.total, threshold);
  if (needed >= report.total || report.passed >= needed) return null;
  return `${describeGates(report)}; at least ${needed} must pass.`;
}

/** "8 of 10 gates passed (failed: npm run lint, npm run e2e)". */
export function describeGates(report: PartialSuccess): string {
  const base = `${report.passed} of ${report.total} gates passed`;
  return report.failed.length > 0 ? `${base} (failed: ${report.failed.join(", ")})` : base;
}
