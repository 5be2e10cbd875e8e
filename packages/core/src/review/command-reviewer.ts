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
 * The reviewer (`sh -c COMMAND`) with its stdout through `head`, which keeps one byte more than
 * a review may have and then leaves (the reviewer's next write ends it, SIGPIPE): a reviewer
 * that prints without end fills no disk. Its own exit status goes to a file of its own (the
 * pipeline's is `head`'s).
 */
const REVIEWER_PIPELINE = [
  '{ sh -c "$LOOPRUN_REVIEW_COMMAND"; echo $? > "$LOOPRUN_REVIEW_STATUS"; }',
  `| head -c ${MAX_REVIEW_OUTPUT_BYTES + 1} > "$LOOPRUN_REVIEW_OUTPUT"`,
].join(" ");

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
  const statusFile = join(dir, "status");
  try {
    const result = await runCommand({
      command: REVIEWER_PIPELINE,
      cwd: input.workspace,
      env: {
        ...input.env,
        LOOPRUN_REVIEW_COMMAND: input.spec.command,
        LOOPRUN_REVIEW_OUTPUT: outFile,
        LOOPRUN_REVIEW_STATUS: statusFile,
      },
      stdin: JSON.stringify(input.review),
      timeoutMs: Math.min(input.spec.timeoutMs, input.timeoutMs),
      outputCapBytes: input.outputCapBytes,
      signal: input.signal,
      ...(input.onSpawn ? { onSpawn: input.onSpawn } : {}),
    });
    const stderr = result.output.trim().slice(-1000);
    if (result.aborted) return { ok: false, error: "the reviewer was interrupted" };
    // What it printed on stderr, or that it printed nothing there.
    const said = stderr ? `: ${stderr}` : " (nothing on stderr)";
    if (result.timedOut) return { ok: false, error: `the reviewer timed out${said}` };
    const size = await stat(outFile).then(
      (s) => s.size,
      () => 0,
    );
    if (size > MAX_REVIEW_OUTPUT_BYTES) {
      return {
        ok: false,
        error: `the reviewer printed more than ${MAX_REVIEW_OUTPUT_BYTES} bytes (it was stopped there)`,
      };
    }
    const status = await readFile(statusFile, "utf8").then(
      (text) => Number.parseInt(text, 10),
      () => null,
    );
    const exitCode = result.exitCode === 0 ? status : result.exitCode;
    if (exitCode !== 0) {
      return {
        ok: false,
        error: `the reviewer exited ${exitCode ?? "on a signal"}${said}`,
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
