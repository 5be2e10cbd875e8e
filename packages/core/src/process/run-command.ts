import { spawn } from "node:child_process";
import { TailBuffer } from "./tail-buffer";

export interface RunCommandOptions {
  command: string;
  cwd: string;
  env: Record<string, string>;
  stdin?: string;
  timeoutMs: number;
  /** @defaultValue 65536 — bytes of output (stdout and stderr together) kept, from the end */
  outputCapBytes?: number;
  /** Aborting kills the command's whole process group. */
  signal?: AbortSignal;
  /** @defaultValue 2000 — between SIGTERM and SIGKILL */
  killGraceMs?: number;
  onSpawn?: (pid: number) => void;
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
 * Runs `sh -c command` in its own process group. On timeout or abort the whole group gets
 * SIGTERM, then SIGKILL; when the command exits, whatever it left in the background is
 * killed too, so no process outlives the call.
 */
export function runCommand(opts: RunCommandOptions): Promise<CommandResult> {
  const started = performance.now();
  const output = new TailBuffer(opts.outputCapBytes ?? 65_536);
  const graceMs = opts.killGraceMs ?? 2000;

  return new Promise((resolve) => {
    const child = spawn("/bin/sh", ["-c", opts.command], {
      cwd: opts.cwd,
      env: opts.env,
      detached: true,
      stdio: ["pipe", "pipe", "pipe"],
    });
    let timedOut = false;
    let aborted = false;
    let killTimer: NodeJS.Timeout | undefined;
    let settled = false;

    const terminate = () => {
      if (child.pid === undefined || killTimer) return;
      killGroup(child.pid, "SIGTERM");
      killTimer = setTimeout(() => {
        if (child.pid !== undefined) killGroup(child.pid, "SIGKILL");
      }, graceMs);
    };
    const timer = setTimeout(() => {
      timedOut = true;
      terminate();
    }, opts.timeoutMs);
    const onAbort = () => {
      aborted = true;
      terminate();
    };
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener("abort", onAbort, { once: true });

    child.stdout.on("data", (chunk: Buffer) => output.write(chunk));
    child.stderr.on("data", (chunk: Buffer) => output.write(chunk));
    child.stdin.on("error", () => {
      // The command did not read its stdin (EPIPE): not an error of ours.
    });
    if (child.pid !== undefined) opts.onSpawn?.(child.pid);
    child.stdin.end(opts.stdin ?? "");

    const finish = (exitCode: number | null, signal: NodeJS.Signals | null, spawnError?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (killTimer) clearTimeout(killTimer);
      opts.signal?.removeEventListener("abort", onAbort);
      let text = output.toString();
      if (spawnError) text += `\n[looprun] could not start the command: ${spawnError.message}`;
      if (timedOut) text += `\n[looprun] killed after the timeout of ${opts.timeoutMs} ms`;
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
      const pid = child.pid;
      // Background children of the command die with it; they may hold our pipes open.
      if (pid !== undefined && groupAlive(pid)) killGroup(pid, "SIGKILL");
      const done = () => finish(code, signal);
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
