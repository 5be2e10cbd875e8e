import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root (bench/support/../..). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface BenchProcess {
  name: string;
  pid: number;
  child: ChildProcess;
  /** The tail of stdout and stderr together. */
  output(): string;
  /** Calls `listener` with every complete stdout line from now on. */
  onLine(listener: (line: string) => void): () => void;
  /** Resolves with the first stdout line that `match` accepts; rejects if the process exits first. */
  waitForLine(match: (line: string) => boolean, timeoutMs?: number): Promise<string>;
  exited: Promise<Exit>;
  hasExited(): boolean;
  /** SIGTERM (or `signal`), SIGKILL after `graceMs`; waits for the exit. */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<Exit>;
}

const live = new Set<BenchProcess>();
const tempDirs = new Set<string>();
const OUTPUT_CAP = 32 * 1024;

/** Kills every process the bench started (SIGKILL) and removes its temp dirs: the last resort. */
export function killEverything(): void {
  for (const p of live) {
    try {
      p.child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
  live.clear();
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

process.once("exit", killEverything);

/** The processes started last (running or not), whose output a failure message shows. */
const recent: BenchProcess[] = [];

/** The tail of the output of the processes started last, for a failure message. */
export function recentOutputs(): string {
  return recent
    .map(
      (p) =>
        `--- ${p.name} (pid ${p.pid}${p.hasExited() ? ", exited" : ""})\n${p.output().slice(-2000)}`,
    )
    .join("\n");
}

/** Stops every process still running (gracefully first), then removes the temp dirs. */
export async function stopEverything(): Promise<void> {
  await Promise.all([...live].map((p) => p.stop("SIGTERM", 10_000)));
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

/** Spawns a tracked process: it is killed when the bench ends, however it ends. */
export function spawnTracked(
  name: string,
  command: string,
  args: string[],
  opts: { env: Record<string, string | undefined>; cwd?: string },
): BenchProcess {
  const child = spawn(command, args, {
    cwd: opts.cwd ?? REPO_ROOT,
    env: opts.env as NodeJS.ProcessEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let partial = "";
  const listeners = new Set<(line: string) => void>();
  const keep = (text: string) => {
    out += text;
    if (out.length > OUTPUT_CAP * 2) out = out.slice(-OUTPUT_CAP);
  };
  child.stdout?.on("data", (chunk: Buffer) => {
    const text = chunk.toString();
    keep(text);
    const lines = (partial + text).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) for (const l of listeners) l(line);
  });
  child.stderr?.on("data", (chunk: Buffer) => keep(chunk.toString()));
  let exit: Exit | null = null;
  const exited = new Promise<Exit>((done) => {
    child.once("error", (error) => {
      keep(`\n[spawn error] ${error.message}\n`);
      exit ??= { code: null, signal: null };
      done(exit);
    });
    child.once("exit", (code, signal) => {
      exit = { code, signal };
      done(exit);
    });
  });
  const proc: BenchProcess = {
    name,
    pid: child.pid ?? -1,
    child,
    output: () => out,
    onLine(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    waitForLine(match, timeoutMs = 60_000) {
      return new Promise((resolveLine, reject) => {
        const timer = setTimeout(() => {
          off();
          reject(
            new Error(`${name}: no expected line within ${timeoutMs} ms\n${out.slice(-2000)}`),
          );
        }, timeoutMs);
        const off = proc.onLine((line) => {
          if (!match(line)) return;
          clearTimeout(timer);
          off();
          resolveLine(line);
        });
        void exited.then((e) => {
          clearTimeout(timer);
          off();
          reject(new Error(`${name} exited (${e.code ?? e.signal})\n${out.slice(-2000)}`));
        });
      });
    },
    exited,
    hasExited: () => exit !== null,
    async stop(signal = "SIGTERM", graceMs = 10_000) {
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
  recent.push(proc);
  if (recent.length > 8) recent.shift();
  void exited.then(() => live.delete(proc));
  return proc;
}

/** A temporary directory, removed at the end of the bench (or earlier by `removeTempDir`). */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

export function removeTempDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  tempDirs.delete(dir);
}

export function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.unref();
    server.on("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => done(port));
    });
  });
}

/** Resident set size of a process in MB (VmRSS from /proc), or NaN when it cannot be read. */
export function rssMb(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1];
    return kb === undefined ? Number.NaN : Number(kb) / 1024;
  } catch {
    return Number.NaN;
  }
}

/** A process's RSS and the part of it that is its own (anonymous memory, not shared file pages). */
export function memoryMb(pid: number): { rss: number; own: number } {
  try {
    const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
    const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, "m").exec(rollup)?.[1]);
    return { rss: kb("Rss") / 1024, own: kb("Anonymous") / 1024 };
  } catch {
    return { rss: Number.NaN, own: Number.NaN };
  }
}

// The pids of a process's children whose command line contains a text: shared with the tests.
export { childPids } from "../../tests/support/processes";

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `condition` until it returns a truthy value (returned), or throws after `timeoutMs`. */
export async function waitUntil<T>(
  what: string,
  condition: () => T | Promise<T>,
  opts: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  let last: unknown;
  for (;;) {
    try {
      const value = await condition();
      if (value) return value as NonNullable<T>;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      const detail = last instanceof Error ? ` (last error: ${last.message})` : "";
      throw new Error(`timed out waiting for ${what}${detail}`);
    }
    await sleep(opts.intervalMs ?? 50);
  }
}

/** The environment of every process the bench starts: the basics, nothing secret. */
export function baseEnv(): Record<string, string | undefined> {
  const { PATH, HOME, LANG, TMPDIR, USER, SHELL } = process.env;
  return { PATH, HOME, LANG, TMPDIR, USER, SHELL };
}

/** Runs a TypeScript file of the bench as its own process (through tsx). */
export function spawnTs(
  name: string,
  file: string,
  env: Record<string, string | undefined>,
): BenchProcess {
  return spawnTracked(name, process.execPath, ["--import", "tsx", join(REPO_ROOT, file)], {
    env: { ...baseEnv(), ...env },
  });
}

/** USER_HZ: 100 on every Linux this runs on (sysconf(_SC_CLK_TCK)). */
const CLOCK_TICKS = 100;

/**
 * The CPU time (ms) in the fields of a /proc stat line (0-based after the state: 11 utime,
 * 12 stime, 13 cutime, 14 cstime). "pid (comm) state ppid …": the comm may hold spaces.
 */
function statCpuMs(stat: string, fields: number[]): number {
  const values = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (fields.reduce((n, i) => n + Number(values[i]), 0) * 1000) / CLOCK_TICKS;
}

/**
 * CPU time (ms) a process has used, with that of its children it has waited for (their
 * commands): utime + stime + cutime + cstime from /proc/<pid>/stat; NaN when unreadable.
 */
export function cpuMs(pid: number): number {
  try {
    return statCpuMs(readFileSync(`/proc/${pid}/stat`, "utf8"), [11, 12, 13, 14]);
  } catch {
    return Number.NaN;
  }
}

/**
 * CPU time (ms) of a process's main thread (the JavaScript of a Node process) and of its other
 * threads together (V8's compiler and garbage collector helpers, libuv's pool); NaN when
 * unreadable. A thread that has ended is not counted (V8's and libuv's last the process's life).
 */
export function threadCpuMs(pid: number): { main: number; others: number } {
  try {
    let main = 0;
    let others = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      let stat: string;
      try {
        stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      } catch {
        continue; // it ended since the listing
      }
      const ms = statCpuMs(stat, [11, 12]);
      if (tid === String(pid)) main += ms;
      else others += ms;
    }
    return { main, others };
  } catch {
    return { main: Number.NaN, others: Number.NaN };
  }
}

/** The machine's busy and total CPU time so far (ticks over all cores, from /proc/stat). */
export function machineTicks(): { busy: number; total: number } {
  try {
    const line = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
    const ticks = line.trim().split(/\s+/).slice(1).map(Number);
    const total = ticks.reduce((a, b) => a + b, 0);
    // idle and iowait: the 4th and 5th fields.
    return { busy: total - (ticks[3] ?? 0) - (ticks[4] ?? 0), total };
  } catch {
    return { busy: Number.NaN, total: Number.NaN };
  }
}
