import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { CommandAgentSpec } from "../domain/run-spec";
import { processExists } from "../process/process-exists";
import { type CommandResult, runCommand } from "../process/run-command";
import { rewriteInPlace } from "../util/rewrite-in-place";
import { CompletionPromiseScanner } from "./completion-promise";

export interface CommandAgentInput {
  spec: CommandAgentSpec;
  prompt: string;
  workspace: string;
  env: Record<string, string>;
  /** What is left of the run's time budget: it may cut the agent's own timeout short. */
  budgetMs: number;
  outputCapBytes: number;
  signal: AbortSignal;
  /** Told the command's process group id as soon as it runs (recorded for crash cleanup). */
  onSpawn?: (pgid: number) => void;
  /** Where to write the prompt (see promptFilePath); else a file removed afterwards. */
  promptFile?: string;
  /** The run's completion promise, looked for in the whole output (see CompletionPromiseScanner). */
  completionPromise?: string | null;
}

export interface CommandAgentResult extends CommandResult {
  /** Whether the output carried the completion promise; `null` when none was asked for. */
  promiseFound: boolean | null;
  /** A tag that was not the run's promise (see CompletionPromiseScanner.other). */
  promiseOther: string | null;
}

const PROMPT_DIR_PREFIX = "looprun-prompt-";

/**
 * Removes the prompt directories, and the command reviewers' directories (a FIFO and what it
 * kept of a reviewer's stderr), that workers which died (kill -9, a crash) left in the
 * temporary directory — their `finally` never ran. Each directory names its worker's pid; one
 * whose process is gone is stale. Called when a worker starts.
 */
export async function removeStaleTempDirs(dir = tmpdir()): Promise<number> {
  let removed = 0;
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    const pid = Number(/^looprun-(?:prompt|review)-(\d+)-/.exec(name)?.[1]);
    if (!Number.isInteger(pid) || pid <= 0 || processExists(pid)) continue;
    await rm(join(dir, name), { recursive: true, force: true });
    removed++;
  }
  return removed;
}

let promptDir: string | null = null;

/**
 * This process's directory for prompt files (mode 0700, outside any workspace): made once —
 * a directory made and removed for every agent run cost more than the run's own writes on a
 * journalled disk — and removed when the process exits (a killed worker's by the next
 * worker's start, see removeStaleTempDirs).
 */
function promptDirectory(): string {
  if (promptDir === null) {
    const dir = mkdtempSync(join(tmpdir(), `${PROMPT_DIR_PREFIX}${process.pid}-`));
    process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
    promptDir = dir;
  }
  return promptDir;
}

/** A prompt file named by `key` (e.g. a run and its epoch), kept until `removePromptFile`. */
export function promptFilePath(key: string): string {
  return join(promptDirectory(), `${key.replace(/[^A-Za-z0-9_-]/g, "_")}.md`);
}

export async function removePromptFile(path: string): Promise<void> {
  await rm(path, { force: true });
}

let promptFiles = 0;

/**
 * Written synchronously: an open, a write and a close through the thread pool are three round
 * trips of the event loop for a file of a few kilobytes, and this write stands between one
 * command and the next (0.8 ms a prompt, up to 2.7 ms on a busy disk, against 0.1 ms). The
 * run's file is rewritten in place from its second iteration on (see rewriteInPlace).
 */
function writePrompt(path: string, prompt: string): void {
  const content = Buffer.from(prompt, "utf8");
  if (rewriteInPlace(path, content)) return;
  try {
    writeFileSync(path, content, { mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    // The directory went (a cleaner of the temporary directory): made again.
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    writeFileSync(path, content, { mode: 0o600 });
  }
}

/**
 * Runs the agent command in the workspace with the prompt on stdin (the prompt file, opened
 * read-only) and in `$LOOPRUN_PROMPT_FILE`: `input.promptFile` (the caller removes it), or a
 * file of its own, removed afterwards. Both live outside the workspace.
 */
export async function runCommandAgent(input: CommandAgentInput): Promise<CommandAgentResult> {
  const own = input.promptFile === undefined;
  const promptFile = input.promptFile ?? promptFilePath(`agent-${++promptFiles}`);
  const promise = input.completionPromise ?? null;
  const scanner = promise === null ? null : new CompletionPromiseScanner(promise, input.prompt);
  try {
    writePrompt(promptFile, input.prompt);
    const result = await runCommand({
      command: input.spec.command,
      cwd: input.workspace,
      env: { ...input.env, LOOPRUN_PROMPT_FILE: promptFile },
      // The prompt file itself, opened read-only: the prompt crosses no channel or pipe.
      stdinFile: promptFile,
      timeoutMs: input.spec.timeoutMs,
      budgetMs: input.budgetMs,
      outputCapBytes: input.outputCapBytes,
      signal: input.signal,
      ...(input.onSpawn ? { onSpawn: input.onSpawn } : {}),
      ...(scanner ? { onOutput: (chunk: Buffer) => scanner.write(chunk) } : {}),
    });
    return {
      ...result,
      promiseFound: scanner ? scanner.found : null,
      promiseOther: scanner ? scanner.other : null,
    };
  } finally {
    if (own) await removePromptFile(promptFile);
  }
}
