import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CommandAgentSpec } from "../domain/run-spec";
import { type CommandResult, runCommand } from "../process/run-command";

export interface CommandAgentInput {
  spec: CommandAgentSpec;
  prompt: string;
  workspace: string;
  env: Record<string, string>;
  /** The budget's deadline may cut the agent's own timeout short. */
  timeoutMs: number;
  outputCapBytes: number;
  signal: AbortSignal;
  /** Told the command's process group id as soon as it runs (recorded for crash cleanup). */
  onSpawn?: (pgid: number) => void;
}

const PROMPT_DIR_PREFIX = "looprun-prompt-";

/**
 * Removes the prompt directories that workers which died (kill -9, a crash) left in the
 * temporary directory — their `finally` never ran. Each directory names its worker's pid; one
 * whose process is gone is stale. Called when a worker starts.
 */
export async function removeStalePromptDirs(dir = tmpdir()): Promise<number> {
  let removed = 0;
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    const pid = Number(/^looprun-prompt-(\d+)-/.exec(name)?.[1]);
    if (!Number.isInteger(pid) || pid <= 0 || processExists(pid)) continue;
    await rm(join(dir, name), { recursive: true, force: true });
    removed++;
  }
  return removed;
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, as another user's.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Runs the agent command in the workspace with the prompt on stdin and in
 * `$LOOPRUN_PROMPT_FILE` (a file outside the workspace, removed afterwards).
 */
export async function runCommandAgent(input: CommandAgentInput): Promise<CommandResult> {
  const dir = await mkdtemp(join(tmpdir(), `${PROMPT_DIR_PREFIX}${process.pid}-`));
  const promptFile = join(dir, "PROMPT.md");
  try {
    await writeFile(promptFile, input.prompt);
    return await runCommand({
      command: input.spec.command,
      cwd: input.workspace,
      env: { ...input.env, LOOPRUN_PROMPT_FILE: promptFile },
      stdin: input.prompt,
      timeoutMs: Math.min(input.spec.timeoutMs, input.timeoutMs),
      outputCapBytes: input.outputCapBytes,
      signal: input.signal,
      ...(input.onSpawn ? { onSpawn: input.onSpawn } : {}),
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const PROMISE_TAG = /<promise>([\s\S]*?)<\/promise>/g;

/** Whether the agent's output carries `<promise>TEXT</promise>` with exactly that text. */
export function hasCompletionPromise(output: string, promise: string): boolean {
  for (const match of output.matchAll(PROMISE_TAG)) {
    if (match[1]?.trim() === promise) return true;
  }
  return false;
}
