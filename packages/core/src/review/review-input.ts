import type { ValidationResult } from "../domain/run";

/** What a reviewer is given; the command reviewer receives exactly this as JSON on stdin. */
export interface ReviewInput {
  task: string;
  requirements: string | null;
  iteration: number;
  /** The run's change so far: baseline snapshot → this iteration's snapshot (a unified diff). */
  diff: string;
  validation: ValidationResult[];
}

/** Cuts a long diff for a model, saying so. */
export function capDiff(diff: string, maxChars: number): string {
  if (diff.length <= maxChars) return diff;
  return `${diff.slice(0, maxChars)}\n[… the diff is cut here: ${diff.length - maxChars} more characters …]\n`;
}

export function renderValidation(results: readonly ValidationResult[]): string {
  if (results.length === 0) return "(no validation commands)";
  return results
    .map((r) => `- \`${r.command}\`: exit ${r.exitCode ?? "none (killed)"} in ${r.durationMs} ms`)
    .join("\n");
}
