import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CommandReviewSpec } from "../domain/run-spec";
import { runCommand } from "../process/run-command";
import { parseJsonAnswer } from "../util/json-answer";
import { ReviewFindings, type ReviewOutcome } from "./review-findings";
import type { ReviewInput } from "./review-input";

export interface CommandReviewInput {
  spec: CommandReviewSpec;
  review: ReviewInput;
  workspace: string;
  env: Record<string, string>;
  /** The run's deadline may cut the reviewer's own timeout short. */
  timeoutMs: number;
  outputCapBytes: number;
  signal: AbortSignal;
  onSpawn?: (pgid: number) => void;
}

/** Largest review a command may print. */
export const MAX_REVIEW_OUTPUT_BYTES = 1024 * 1024;

/**
 * Runs the reviewer command (`sh -c COMMAND` in the workspace) with the review input as JSON
 * on stdin. Its stdout goes to a file outside the workspace, so that stderr (kept for error
 * messages) cannot corrupt the JSON; it must be `{blockingIssues, nonBlockingIssues, score,
 * fixPlan}`. A non-zero exit, a timeout or anything else on stdout is an error, never an
 * approval.
 */
export async function runCommandReview(input: CommandReviewInput): Promise<ReviewOutcome> {
  const dir = await mkdtemp(join(tmpdir(), "looprun-review-"));
  const outFile = join(dir, "review.json");
  try {
    const result = await runCommand({
      // The braces keep the command's own syntax whole (`;`, `&&`, pipes, comments).
      command: `{\n${input.spec.command}\n} > "$LOOPRUN_REVIEW_OUTPUT"`,
      cwd: input.workspace,
      env: { ...input.env, LOOPRUN_REVIEW_OUTPUT: outFile },
      stdin: JSON.stringify(input.review),
      timeoutMs: Math.min(input.spec.timeoutMs, input.timeoutMs),
      outputCapBytes: input.outputCapBytes,
      signal: input.signal,
      ...(input.onSpawn ? { onSpawn: input.onSpawn } : {}),
    });
    const stderr = result.output.trim().slice(-1000);
    if (result.aborted) return { ok: false, error: "the reviewer was interrupted" };
    if (result.timedOut) return { ok: false, error: `the reviewer timed out: ${stderr}` };
    if (result.exitCode !== 0) {
      return {
        ok: false,
        error: `the reviewer exited ${result.exitCode ?? "on a signal"}: ${stderr}`,
      };
    }
    const size = await stat(outFile).then(
      (s) => s.size,
      () => 0,
    );
    if (size > MAX_REVIEW_OUTPUT_BYTES) {
      return {
        ok: false,
        error: `the reviewer printed ${size} bytes (more than ${MAX_REVIEW_OUTPUT_BYTES})`,
      };
    }
    const stdout = size === 0 ? "" : await readFile(outFile, "utf8");
    const parsed = parseJsonAnswer(ReviewFindings, stdout);
    if (!parsed.ok) {
      return {
        ok: false,
        error: `invalid reviewer output (${parsed.error}); stdout began: ${JSON.stringify(stdout.slice(0, 300))}`,
      };
    }
    return { ok: true, findings: parsed.value };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
