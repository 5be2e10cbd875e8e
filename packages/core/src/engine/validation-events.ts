import type { ValidationResult } from "../domain/run";
import type { GateReport } from "../validation/gates";
import type { EventSpec } from "./run-context";

/**
 * Whether an iteration's validation failed: under the run's `successThreshold` when its gates
 * were weighed (`gates`), else whenever a command exited non-zero.
 */
export function validationFailed(
  validation: readonly ValidationResult[],
  gates: GateReport | undefined,
): boolean {
  return gates ? !gates.ok : validation.some((v) => v.exitCode !== 0);
}

/** The `validation_passed` or `validation_failed` event of iteration `n` (none without commands). */
export function validationEvents(
  n: number,
  validation: readonly ValidationResult[],
  gates: GateReport | undefined,
): EventSpec[] {
  if (validation.length === 0) return [];
  return [
    [
      validationFailed(validation, gates) ? "validation_failed" : "validation_passed",
      {
        iteration: n,
        results: validation.map(({ command, exitCode, durationMs }) => ({
          command,
          exitCode,
          durationMs,
        })),
        ...(gates?.ok && gates.failed.length > 0 ? { partial: true, failed: gates.failed } : {}),
      },
    ],
  ];
}
