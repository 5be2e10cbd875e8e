import type { IterationOutcome, IterationRecord, ValidationResult } from "../domain/run";

/**
 * Stall detection by progress. An iteration makes **no progress** when
 *
 * - its snapshot is identical to the previous one (the workspace diff is empty), and
 * - its gates failed the same way as the previous decided iteration's: the same outcome and
 *   the same failing validation commands with the same exit codes.
 *
 * The validation output is deliberately *not* compared: test runners print durations, temp
 * paths and process ids, so identical failures rarely print identical text; an unchanged
 * workspace that fails the same commands with the same codes is the signal that matters.
 * The first iteration has no previous one to compare with and never counts.
 */
export function gateSignature(outcome: IterationOutcome | null, validation: ValidationResult[]) {
  const failing = validation
    .filter((v) => v.exitCode !== 0)
    .map((v) => `${v.command}\u0000${v.exitCode ?? "killed"}`);
  return JSON.stringify([outcome, failing]);
}

export interface ProgressFacts {
  /** The iteration's workspace diff against the previous snapshot was not empty. */
  changed: boolean;
  outcome: IterationOutcome;
  validation: ValidationResult[];
  /** The previous decided iteration, `null` before the first. */
  previous: IterationRecord | null;
}

export function madeNoProgress(facts: ProgressFacts): boolean {
  if (facts.changed || facts.previous === null) return false;
  return (
    gateSignature(facts.outcome, facts.validation) ===
    gateSignature(facts.previous.outcome, facts.previous.validation)
  );
}

/** The run's count of iterations in a row without progress, after this one. */
export function nextStalledCount(current: number, facts: ProgressFacts): number {
  return madeNoProgress(facts) ? current + 1 : 0;
}
