import { readdirSync } from "node:fs";
import { launch } from "./launch";
import { readProcStat, runs } from "./proc-stat";
import { spawnErrorMessage } from "./spawn-error";
import { TailBuffer } from "./tail-buffer";

export interface RunCommandOptions {
  command: string;
  cwd: string;
  env: Record<string, string>;
  stdin?: string;
  /** The command's stdin is this file instead of `stdin` (see LaunchOptions.stdinFile). */
  stdinFile?: string;
  /** The command's own timeout. */
  timeoutMs: number;
  /**
   * What is left of the run's time budget (maxMinutes), when it may end first: the command is
   * then killed at the budget's end, and its output says the budget ran out (not that its own
   * timeout was a number it never was).
   */
  budgetMs?: number;
  /** @defaultValue 65536 — bytes of output (stdout and stderr together) kept, from the end */
  outputCapBytes?: number;
  /** Aborting kills the command's whole process group. */
  signal?: AbortSignal;
  /** @defaultValue 2000 — between SIGTERM and SIGKILL */
  killGraceMs?: number;
  onSpawn?: (pid: number) => void;
  /** Each piece of the output as it comes, all of it (only its tail is kept). */
  onOutput?: (chunk: Buffer) => void;
}

export interface CommandResult {
  /** `null` when the command was killed by a signal. */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  output: string;
  durationMs: number;
  timedOut: boolean;
  aborted: boolean;
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether a process of the group still runs. Zombies (exited, not yet reaped — a container's
 * PID 1 may never reap orphans) do not count. Without a Linux /proc, any member counts.
 */
function groupRunning(pgid: number): boolean {
  if (!groupAlive(pgid)) return false;
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return true;
  }
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    const stat = readProcStat(name); // null: gone meanwhile
    if (stat?.pgrp === pgid && runs(stat)) return true;
  }
  return false;
}

/**
 * Waits (up to `maxMs`) until no process of the group runs any more: a killed process closes
 * its pipes before it has finished exiting, so "the output is closed" does not mean "dead".
 */
async function waitForGroupExit(pgid: number, maxMs: number): Promise<void> {
  const end = performance.now() + maxMs;
  while (groupRunning(pgid) && performance.now() < end) {
    killGroup(pgid, "SIGKILL");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * Runs `sh -c command` in its own process group. On timeout or abort the whole group gets
 * SIGTERM, then SIGKILL; when the command exits, whatever it left in the background is
 * killed too, so no process outlives the call.
 */
export function runCommand(opts: RunCommandOptions): Promise<CommandResult> {
  const started = performance.now();
  const output = new TailBuffer(opts.outputCapBytes ?? 65_536);
  const graceMs = opts.killGraceMs ?? 2000;
  const timeoutMs = Math.min(opts.timeoutMs, opts.budgetMs ?? Number.POSITIVE_INFINITY);
  const byBudget = timeoutMs < opts.timeoutMs;

  return new Promise((resolve) => {
    const child = launch("/bin/sh", ["-c", opts.command], {
      cwd: opts.cwd,
      env: opts.env,
      detached: true,
      // One pipe for stdout and stderr where it can (as `2>&1`): the output keeps its order.
      mergeOutput: true,
      stdin: opts.stdin ?? "",
      ...(opts.stdinFile !== undefined ? { stdinFile: opts.stdinFile } : {}),
    });
    let timedOut = false;
    let aborted = false;
    let killTimer: NodeJS.Timeout | undefined;
    let settled = false;
    // Asked to end before it ran (through a launcher, the pid comes a little later).
    let endWhenRunning = false;

    const terminate = () => {
      if (child.pid === undefined) {
        endWhenRunning = true;
        return;
      }
      if (killTimer) return;
      killGroup(child.pid, "SIGTERM");
      killTimer = setTimeout(() => {
        if (child.pid !== undefined) killGroup(child.pid, "SIGKILL");
      }, graceMs);
    };
    const timer = setTimeout(() => {
      timedOut = true;
      terminate();
    }, timeoutMs);
    const onAbort = () => {
      aborted = true;
      terminate();
    };
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener("abort", onAbort, { once: true });

    const onOutput = opts.onOutput;
    const read = onOutput
      ? (chunk: Buffer) => {
          output.write(chunk);
          onOutput(chunk);
        }
      : (chunk: Buffer) => output.write(chunk);
    child.stdout.on("data", read);
    child.stderr.on("data", read);
    // The command runs while the caller records its group.
    child.on("spawn", () => {
      if (child.pid !== undefined) opts.onSpawn?.(child.pid);
      if (endWhenRunning) terminate();
    });

    const finish = (exitCode: number | null, signal: NodeJS.Signals | null, spawnError?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (killTimer) clearTimeout(killTimer);
      opts.signal?.removeEventListener("abort", onAbort);
      let text = output.toString();
      if (spawnError) {
        text += `\n[looprun] could not start the command: ${spawnErrorMessage(spawnError, opts.cwd)}`;
      }
      if (timedOut) {
        text += byBudget
          ? `\n[looprun] killed: the run's time budget (maxMinutes) ran out (after ${timeoutMs} ms)`
          : `\n[looprun] killed after the timeout of ${timeoutMs} ms`;
      }
      resolve({
        exitCode,
        signal,
        output: text,
        durationMs: Math.round(performance.now() - started),
        timedOut,
        aborted,
      });
    };

    child.on("error", (error) => finish(null, null, error));
    child.on("exit", (code, signal) => {
      clearTimeout(timer); // it has exited: a timeout can no longer apply
      const pid = child.pid;
      // Background children of the command die with it; they may hold our pipes open.
      if (pid !== undefined && groupAlive(pid)) killGroup(pid, "SIGKILL");
      const done = () => {
        // Resolve only once the command's processes are dead, not merely dying.
        if (pid === undefined) finish(code, signal);
        else void waitForGroupExit(pid, graceMs).then(() => finish(code, signal));
      };
      const fallback = setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
        done();
      }, 1000);
      child.once("close", () => {
        clearTimeout(fallback);
        done();
      });
    });
  });
}
