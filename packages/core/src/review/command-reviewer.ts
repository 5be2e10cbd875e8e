import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CommandReviewSpec } from "../domain/run-spec";
import { runCommand } from "../process/run-command";
import { forPrompt } from "../util/for-prompt";
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
  signal: AbortSignal;
  onSpawn?: (pgid: number) => void;
}

/** Largest review a command may print. */
export const MAX_REVIEW_OUTPUT_BYTES = 1024 * 1024;

/** What the wrapper says when it cannot make its FIFO (told apart from a reviewer's own 125). */
const NO_FIFO = "[looprun] could not make a FIFO for the reviewer's stderr";

/** How much of the start and of the end of a reviewer's stderr is kept, for its errors. */
const STDERR_KEPT_BYTES = 4096;

/**
 * The reviewer (`sh -c COMMAND`) with its stdout the command's output (read by the worker, as
 * an agent's is) and its stderr through a FIFO: `head` keeps its first bytes (written as they
 * come, `stdbuf -o0`: a `head` killed before its end would lose what it holds), `tail` its
 * last (read to the end: a reviewer is never stopped for what it logs), each in a file of its
 * own, so stderr cannot corrupt the JSON and fills no disk. Once the reviewer exits they get a
 * second to keep what is left in the FIFO (they end at once unless something the reviewer
 * left in the background holds its stderr: then only the start is kept; 0.2 s was too short
 * for `tail` to be scheduled on a loaded 2-core machine, and its end was lost), and the command ends
 * with the reviewer's status: what it left in the background is killed with its process
 * group, as an agent's is. (With its stdout through `head` as well, the command waited for
 * such a child, holding a review that had been printed until its timeout.)
 */
const REVIEWER = [
  `mkfifo "$LOOPRUN_REVIEW_STDERR.fifo" || { echo "${NO_FIFO}"; exit 125; }`,
  'unbuffered=$(command -v stdbuf > /dev/null && echo "stdbuf -o0")',
  `{ $unbuffered head -c ${STDERR_KEPT_BYTES} > "$LOOPRUN_REVIEW_STDERR.head"; tail -c ${STDERR_KEPT_BYTES} > "$LOOPRUN_REVIEW_STDERR.tail"; } < "$LOOPRUN_REVIEW_STDERR.fifo" &`,
  "kept=$!",
  'sh -c "$LOOPRUN_REVIEW_COMMAND" 2> "$LOOPRUN_REVIEW_STDERR.fifo"',
  "status=$?",
  // The shell's own notes ("Terminated") would go to stdout, the review's.
  "exec 2> /dev/null",
  '{ sleep 1; kill "$kept"; } &',
  'wait "$kept"',
  'exit "$status"',
].join("\n");

/** The end of what the reviewer printed on stderr (its start when its end was not kept). */
async function stderrOf(file: string): Promise<string> {
  const read = (part: string) => readFile(`${file}.${part}`, "utf8").catch(() => "");
  const [head, tail] = await Promise.all([read("head"), read("tail")]);
  // As a terminal shows it: a binary or coloured stderr is no text for an error message.
  return forPrompt(tail.trim() || head.trim()).slice(-1000);
}

/**
 * Runs the reviewer command (`sh -c COMMAND` in the workspace) with the review input as JSON
 * on stdin. Only its stdout is read as the review (stderr is kept apart, for error messages);
 * it must be `{blockingIssues, nonBlockingIssues, score, fixPlan}`, at most
 * MAX_REVIEW_OUTPUT_BYTES (a reviewer that prints more is stopped there). A non-zero exit, a
 * timeout or anything else on stdout is an error, never an approval.
 */
export async function runCommandReview(input: CommandReviewInput): Promise<ReviewOutcome> {
  // Named after this worker: a crashed one's is removed when a worker starts (removeStaleTempDirs).
  const dir = await mkdtemp(join(tmpdir(), `looprun-review-${process.pid}-`));
  const stderrFile = join(dir, "stderr");
  const tooMuch = new AbortController();
  let printed = 0;
  try {
    const result = await runCommand({
      command: REVIEWER,
      cwd: input.workspace,
      env: {
        ...input.env,
        LOOPRUN_REVIEW_COMMAND: input.spec.command,
        LOOPRUN_REVIEW_STDERR: stderrFile,
      },
      stdin: JSON.stringify(input.review),
      timeoutMs: Math.min(input.spec.timeoutMs, input.timeoutMs),
      outputCapBytes: MAX_REVIEW_OUTPUT_BYTES + 1,
      signal: AbortSignal.any([input.signal, tooMuch.signal]),
      onOutput: (chunk) => {
        printed += chunk.length;
        if (printed > MAX_REVIEW_OUTPUT_BYTES) tooMuch.abort();
      },
      ...(input.onSpawn ? { onSpawn: input.onSpawn } : {}),
    });
    if (tooMuch.signal.aborted && !input.signal.aborted) {
      return {
        ok: false,
        error: `the reviewer printed more than ${MAX_REVIEW_OUTPUT_BYTES} bytes (it was stopped there)`,
      };
    }
    if (result.aborted) return { ok: false, error: "the reviewer was interrupted" };
    // The command's own words, when it could not run the reviewer (no workspace, no mkfifo).
    const output = result.output.trim().slice(-1000);
    const spawnFailed = result.exitCode === null && result.signal === null;
    if ((spawnFailed || (result.exitCode === 125 && output.includes(NO_FIFO))) && output) {
      return { ok: false, error: `the reviewer could not start: ${forPrompt(output)}` };
    }
    const stderr = await stderrOf(stderrFile);
    // What it printed on stderr, or that it printed nothing there.
    const said = stderr ? `: ${stderr}` : " (nothing on stderr)";
    if (result.timedOut) return { ok: false, error: `the reviewer timed out${said}` };
    if (result.exitCode !== 0) {
      return {
        ok: false,
        error: `the reviewer exited ${result.exitCode ?? "on a signal"}${said}`,
      };
    }
    const stdout = result.output;
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
