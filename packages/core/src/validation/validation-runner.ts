import type { ValidationResult } from "../domain/run";
import { runCommand } from "../process/run-command";
import { capTail } from "../util/cut-marks";
import { forPrompt } from "../util/for-prompt";

/**
 * What the next prompt carries of the failed commands' output, all of them together: the
 * stored outputs keep their own cap (64 KiB each). A prompt stays well under the 128 KiB an
 * agent CLI can take as one argument, and an LLM's context is not spent on a log's start.
 */
export const FEEDBACK_OUTPUT_BYTES = 32 * 1024;
/** Each failed command keeps at least this much of its output's end in the feedback. */
const FEEDBACK_OUTPUT_MIN_BYTES = 4 * 1024;

export interface ValidationInput {
  commands: readonly string[];
  workspace: string;
  env: Record<string, string>;
  timeoutMs: number;
  /** Time left before the run's deadline. */
  deadlineMs: number;
  outputCapBytes: number;
  signal: AbortSignal;
  /** Awaited: a rejection (e.g. a lost lease) ends the validation with that error. */
  onCommandStart?: (index: number, command: string) => void | Promise<void>;
  onSpawn?: (pgid: number) => void;
}

export interface ValidationOutcome {
  results: ValidationResult[];
  passed: boolean;
  /** A command was cut short by the deadline or an abort: the results are incomplete. */
  interrupted: "deadline" | "aborted" | null;
}

/** Runs every validation command in order (all of them, so the feedback is complete). */
export async function runValidation(input: ValidationInput): Promise<ValidationOutcome> {
  const results: ValidationResult[] = [];
  const startedAt = Date.now();
  for (const [index, command] of input.commands.entries()) {
    await input.onCommandStart?.(index, command);
    const left = input.deadlineMs - (Date.now() - startedAt);
    if (left <= 0) return { results, passed: false, interrupted: "deadline" };
    const result = await runCommand({
      command,
      cwd: input.workspace,
      env: input.env,
      timeoutMs: input.timeoutMs,
      budgetMs: left,
      outputCapBytes: input.outputCapBytes,
      signal: input.signal,
      ...(input.onSpawn ? { onSpawn: input.onSpawn } : {}),
    });
    results.push({
      command,
      exitCode: result.exitCode,
      durationMs: result.durationMs,
      output: result.output,
    });
    if (result.aborted) return { results, passed: false, interrupted: "aborted" };
    if (result.timedOut && result.durationMs >= left - 5) {
      return { results, passed: false, interrupted: "deadline" };
    }
  }
  return { results, passed: results.every((r) => r.exitCode === 0), interrupted: null };
}

/**
 * Each output's share of `total` bytes: the shortest take what they need and leave the rest to
 * the others (a long log beside two one-liners keeps nearly all of it); none gets less than
 * `min`.
 */
export function feedbackShares(sizes: readonly number[], total: number, min: number): number[] {
  const shares = sizes.map(() => 0);
  let left = total;
  const shortestFirst = sizes.map((_, i) => i).sort((a, b) => (sizes[a] ?? 0) - (sizes[b] ?? 0));
  for (const [k, i] of shortestFirst.entries()) {
    const share = Math.max(min, Math.floor(left / (shortestFirst.length - k)));
    shares[i] = share;
    left = Math.max(0, left - Math.min(sizes[i] ?? 0, share));
  }
  return shares;
}

/**
 * Feedback for the next iteration: each failed command with its exit code and output tail,
 * after `shortfall` (how many gates passed of how many needed; see describeShortfall) if any.
 */
export function validationFeedback(
  results: readonly ValidationResult[],
  shortfall: string | null = null,
): string {
  const failed = results.filter((r) => r.exitCode !== 0);
  // As a terminal shows it, then cut: the feedback is what the next prompt reads (its
  // escape codes and progress bars would take the room of the output's last lines).
  const outputs = failed.map((r) => forPrompt(r.output).trimEnd());
  const shares = feedbackShares(
    outputs.map((o) => Buffer.byteLength(o, "utf8")),
    FEEDBACK_OUTPUT_BYTES,
    FEEDBACK_OUTPUT_MIN_BYTES,
  );
  const commands = failed.map((r, i) => {
    const head = `$ ${r.command}\n(exit code ${r.exitCode ?? "none: killed"})`;
    const output = outputs[i] ?? "";
    // A command that printed nothing ends at its exit code, not with an empty line.
    return output === "" ? head : `${head}\n${capTail(output, shares[i] ?? 0, "earlier output")}`;
  });
  return (shortfall === null ? commands : [shortfall, ...commands]).join("\n\n");
}
