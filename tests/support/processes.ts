import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

// Waiting, child processes and temporary directories for the end-to-end tests.

/** The repository root (tests/support/..). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
/** The `looprun` CLI, as a user runs it. */
export const LOOPRUN_BIN = join(REPO_ROOT, "apps/cli/bin/looprun.js");

// ---------------------------------------------------------------------------------------------
// Polling

export interface WaitOptions {
  /** @defaultValue 30000 */
  timeoutMs?: number;
  /** @defaultValue 100 */
  intervalMs?: number;
  /** Named in the error when the deadline passes. */
  message?: string;
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Thrown by a `waitFor` condition to stop waiting at once (the condition can no longer hold). */
export class StopWaiting extends Error {
  override readonly name = "StopWaiting";
}

/**
 * Polls `condition` until it returns a truthy value (which is returned), or throws when the
 * deadline passes. Errors thrown by `condition` count as "not yet" and the last one is reported,
 * except `StopWaiting`, which ends the wait at once.
 */
export async function waitFor<T>(
  condition: () => T | Promise<T>,
  opts: WaitOptions = {},
): Promise<NonNullable<T>> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await condition();
      if (value) return value as NonNullable<T>;
      last = value;
    } catch (error) {
      if (error instanceof StopWaiting) throw error;
      last = error;
    }
    if (Date.now() >= deadline) {
      const detail =
        last instanceof Error
          ? ` (last error: ${last.message})`
          : last
            ? ` (last: ${JSON.stringify(last)})`
            : "";
      throw new Error(
        `waitFor: ${opts.message ?? "condition"} not met within ${timeoutMs} ms${detail}`,
      );
    }
    await pause(opts.intervalMs ?? 100);
  }
}

// ---------------------------------------------------------------------------------------------
// Processes

/**
 * Whether `pid` runs `comm` (the program's name) with LOOPRUN_RUN_ID=`runId` in its environment:
 * a command of the run, exec'd (mid-exec a process's environment cannot be read, and a search
 * by run id would miss it).
 */
export function runsForRun(pid: number, comm: string, runId: string): boolean {
  try {
    return (
      readFileSync(`/proc/${pid}/comm`, "utf8").trim() === comm &&
      readFileSync(`/proc/${pid}/environ`, "utf8").includes(`LOOPRUN_RUN_ID=${runId}`)
    );
  } catch {
    return false;
  }
}

/** The command lines of the processes whose environment names this run (LOOPRUN_RUN_ID). */
export function commandsOfRun(runId: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      if (
        !readFileSync(`/proc/${pid}/environ`, "utf8")
          .split("\0")
          .includes(`LOOPRUN_RUN_ID=${runId}`)
      )
        continue;
      found.push(readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " "));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

/** The pids of `parent`'s children whose command line contains `match`. */
export function childPids(parent: number, match: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid !== parent) continue;
      if (readFileSync(`/proc/${name}/cmdline`, "utf8").includes(match)) found.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** Whether a process is alive (a zombie, dead but not reaped, counts as dead). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // "pid (comm) STATE ..." — comm may contain spaces and parentheses.
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    // No /proc (or it vanished just now): trust kill(0).
    return existsSync(`/proc/${pid}`) || !existsSync("/proc/self");
  }
}

/** Reads a pid written by an agent (`echo $$ > file`); `undefined` until the file is complete. */
export function readPid(file: string): number | undefined {
  if (!existsSync(file)) return undefined;
  const text = readFileSync(file, "utf8");
  if (!text.endsWith("\n")) return undefined;
  const pid = Number(text.trim());
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ManagedProcess {
  name: string;
  child: ChildProcess;
  pid: number;
  /** stdout and stderr so far (the tail). */
  output(): string;
  /** stdout alone so far (the tail). */
  stdout(): string;
  /** Resolves when the process has exited. */
  exited: Promise<Exit>;
  hasExited(): boolean;
  /** Sends `signal` (SIGTERM) and waits for the exit; SIGKILL after `graceMs` (15 s). */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<Exit>;
}

const live = new Set<ManagedProcess>();

// Last resort: never leave a child behind when the test process goes away.
process.once("exit", () => {
  for (const p of live) {
    try {
      p.child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
});

const OUTPUT_CAP = 64 * 1024;

/** Spawns a process (tracked: killed when the test process exits, whatever happens). */
export function spawnManaged(
  name: string,
  command: string,
  args: string[],
  opts: { env: Record<string, string | undefined>; cwd?: string; stdin?: string },
): ManagedProcess {
  const child = spawn(command, args, {
    cwd: opts.cwd ?? REPO_ROOT,
    env: opts.env as NodeJS.ProcessEnv,
    stdio: ["pipe", "pipe", "pipe"],
  });
  let out = "";
  let stdout = "";
  const collect = (chunk: Buffer) => {
    out += chunk.toString();
    if (out.length > OUTPUT_CAP * 2) out = out.slice(-OUTPUT_CAP);
  };
  child.stdout?.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
    if (stdout.length > OUTPUT_CAP * 2) stdout = stdout.slice(-OUTPUT_CAP);
    collect(chunk);
  });
  child.stderr?.on("data", collect);
  child.stdin?.on("error", () => {});
  child.stdin?.end(opts.stdin ?? "");
  let exit: Exit | null = null;
  const exited = new Promise<Exit>((done) => {
    child.once("error", (error) => {
      collect(Buffer.from(`\n[spawn error] ${error.message}\n`));
      exit ??= { code: null, signal: null };
      done(exit);
    });
    child.once("exit", (code, signal) => {
      exit = { code, signal };
      done(exit);
    });
  });
  const proc: ManagedProcess = {
    name,
    child,
    pid: child.pid ?? -1,
    output: () => out,
    stdout: () => stdout,
    exited,
    hasExited: () => exit !== null,
    async stop(signal = "SIGTERM", graceMs = 15_000) {
      if (exit === null) {
        child.kill(signal);
        const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
        await exited;
        clearTimeout(timer);
      }
      live.delete(proc);
      return exited;
    },
  };
  live.add(proc);
  void exited.then(() => live.delete(proc));
  return proc;
}

/** The environment a test runs the CLI with: its PATH and HOME, and the API at `url`. */
export function cliEnvFor(url: string): Record<string, string | undefined> {
  return { PATH: process.env.PATH, HOME: process.env.HOME, LOOPRUN_URL: url };
}

/** Runs the `looprun` CLI to completion. */
export async function runCli(
  args: string[],
  env: Record<string, string | undefined>,
  timeoutMs = 50_000,
): Promise<{ code: number | null; output: string; stdout: string }> {
  const proc = spawnManaged(`looprun ${args[0]}`, process.execPath, [LOOPRUN_BIN, ...args], {
    env,
  });
  const timer = setTimeout(() => proc.child.kill("SIGKILL"), timeoutMs);
  const { code } = await proc.exited;
  clearTimeout(timer);
  return { code, output: proc.output(), stdout: proc.stdout() };
}

/** The run and session ids of the `submitted run … (session …)` line `looprun submit` prints. */
export function submittedId(output: string): { id: string; sessionId: string } {
  const match = /submitted run ([0-9A-Z]{26}) \(session ([A-Za-z0-9_-]+)\)/.exec(output);
  if (!match) throw new Error(`no "submitted run" line in:\n${output}`);
  return { id: match[1] as string, sessionId: match[2] as string };
}

// ---------------------------------------------------------------------------------------------
// Temporary directories

/** A new temporary directory (the caller removes it; a stack removes its own `dir`). */
export function tempDir(prefix = "looprun-e2e-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** Single-quotes a string for `sh`. */
export function shq(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}
