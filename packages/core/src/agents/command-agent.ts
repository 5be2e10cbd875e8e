import { mkdtemp, rm, writeFile } from "node:fs/promises";
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

/**
 * Runs the agent command in the workspace with the prompt on stdin and in
 * `$LOOPRUN_PROMPT_FILE` (a file outside the workspace, removed afterwards).
 */
export async function runCommandAgent(input: CommandAgentInput): Promise<CommandResult> {
  const dir = await mkdtemp(join(tmpdir(), "looprun-prompt-"));
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
