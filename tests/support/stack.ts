import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { expect } from "vitest";
import { freePort } from "./redis-server";

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

// ---------------------------------------------------------------------------------------------
// Temporary directories

/** A new temporary directory (the caller removes it; a stack removes its own `dir`). */
export function tempDir(prefix = "looprun-e2e-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

// ---------------------------------------------------------------------------------------------
// HTTP

// biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

export interface RequestOptions {
  /** Sent as is instead of `JSON.stringify(body)`. */
  raw?: string;
  headers?: Record<string, string>;
  /** @defaultValue 15000 */
  timeoutMs?: number;
}

/** One HTTP request; the body is parsed as JSON when it is JSON. */
// biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
export async function request<T = any>(
  baseUrl: string,
  method: string,
  path: string,
  body?: unknown,
  opts: RequestOptions = {},
): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...opts.headers };
  let payload: string | undefined = opts.raw;
  if (payload === undefined && body !== undefined) payload = JSON.stringify(body);
  if (payload !== undefined) headers["content-type"] ??= "application/json";
  const res = await fetch(new URL(path, baseUrl), {
    method,
    headers,
    body: payload,
    signal: AbortSignal.timeout(opts.timeoutMs ?? 15_000),
  });
  const text = await res.text();
  let parsed: unknown = text;
  if ((res.headers.get("content-type") ?? "").includes("json") && text) parsed = JSON.parse(text);
  return { status: res.status, body: parsed as T, headers: res.headers };
}

// ---------------------------------------------------------------------------------------------
// The stack: an API process and worker processes on one database (a SQLite file, or
// PostgreSQL), one Redis, one queue prefix

export interface StackOptions {
  /** @defaultValue inject("redisUrl") — pass it in from the test file */
  redisUrl: string;
  /** Worker processes started with the API. @defaultValue 1 */
  workers?: number;
  /**
   * A PostgreSQL database for every process (DATABASE_URL); unset: a SQLite file in the
   * stack's directory. The caller creates and drops it.
   */
  databaseUrl?: string;
  /** Extra environment for every process. */
  env?: Record<string, string>;
}

export interface Stack {
  url: string;
  dir: string;
  workspacesRoot: string;
  /** The SQLite file (unused, and never created, when `databaseUrl` is set). */
  databasePath: string;
  /** The PostgreSQL database of every process, if any. */
  databaseUrl: string | undefined;
  prefix: string;
  /** The environment the API and the workers were started with. */
  env: Record<string, string | undefined>;
  apiProcess: ManagedProcess;
  /** Worker processes started so far (including exited ones). */
  workers: ManagedProcess[];
  // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
  api<T = any>(
    method: string,
    path: string,
    body?: unknown,
    opts?: RequestOptions,
  ): Promise<ApiResponse<T>>;
  /** Starts one more worker process. */
  startWorker(extraEnv?: Record<string, string>): ManagedProcess;
  /** SIGTERMs every running worker and waits for them to exit. */
  stopWorkers(): Promise<void>;
  /** Output of every process, for failure messages. */
  logs(): string;
  /** Kills everything (SIGTERM, then SIGKILL) and removes the temporary directory. */
  stop(): Promise<void>;
}

/** The environment the API and worker get: PATH and HOME from here, nothing secret. */
function baseEnv(): Record<string, string | undefined> {
  const { PATH, HOME, LANG, TMPDIR, USER, SHELL } = process.env;
  return { PATH, HOME, LANG, TMPDIR, USER, SHELL };
}

/** Starts the API (waiting for /healthz) and `workers` worker processes. */
export async function startStack(opts: StackOptions): Promise<Stack> {
  const dir = tempDir("looprun-stack-");
  const workspacesRoot = join(dir, "workspaces");
  mkdirSync(workspacesRoot);
  const databasePath = join(dir, "looprun.db");
  const prefix = `e2e-${randomBytes(6).toString("hex")}`;
  const port = await freePort();
  const env: Record<string, string | undefined> = {
    ...baseEnv(),
    PORT: String(port),
    HOST: "127.0.0.1",
    DATABASE_PATH: databasePath,
    ...(opts.databaseUrl ? { DATABASE_URL: opts.databaseUrl } : {}),
    WORKSPACES_ROOT: workspacesRoot,
    REDIS_URL: opts.redisUrl,
    LOOPRUN_QUEUE_PREFIX: prefix,
    LOG_LEVEL: "warn",
    LOOPRUN_STOP_POLL_MS: "100",
    WORKER_CONCURRENCY: "2",
    // Tests poll the API: the per-client rate limit is not what they are about.
    RATE_LIMIT_PER_MINUTE: "0",
    ...opts.env,
  };
  const url = `http://127.0.0.1:${port}`;
  const all: ManagedProcess[] = [];
  const workers: ManagedProcess[] = [];

  const spawnLooprun = (name: string, command: string, extra: Record<string, string> = {}) => {
    const proc = spawnManaged(name, process.execPath, [LOOPRUN_BIN, command], {
      env: { ...env, ...extra },
    });
    all.push(proc);
    return proc;
  };
  // The tail of each process's output: enough to see why, short enough to read.
  const logs = () =>
    all
      .map((p) => {
        const out = p.output();
        const tail = out.length > 4000 ? `[…]${out.slice(-4000)}` : out;
        return `--- ${p.name} (pid ${p.pid})${p.hasExited() ? " [exited]" : ""}\n${tail}`;
      })
      .join("\n");

  const apiProcess = spawnLooprun("api", "api");
  const stack: Stack = {
    url,
    dir,
    workspacesRoot,
    databasePath,
    databaseUrl: opts.databaseUrl,
    prefix,
    env,
    apiProcess,
    workers,
    api: (method, path, body, reqOpts) => request(url, method, path, body, reqOpts),
    startWorker(extraEnv) {
      const worker = spawnLooprun(`worker ${workers.length + 1}`, "worker", extraEnv);
      workers.push(worker);
      return worker;
    },
    async stopWorkers() {
      await Promise.all(workers.map((w) => w.stop()));
    },
    logs,
    async stop() {
      await Promise.all(all.map((p) => p.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await waitForHealthy(url, apiProcess);
    for (let i = 0; i < (opts.workers ?? 1); i++) stack.startWorker();
  } catch (error) {
    const output = logs();
    await stack.stop();
    throw new Error(`${(error as Error).message}\n${output}`);
  }
  return stack;
}

/**
 * Polls GET /healthz until the API answers it (200, or 503 when Redis or the database is
 * down: some tests start it so); fails at once if the process exits first.
 */
export async function waitForHealthy(
  url: string,
  proc: ManagedProcess,
  timeoutMs = 45_000,
): Promise<void> {
  await waitFor(
    async () => {
      if (proc.hasExited()) throw new Error(`${proc.name} exited: ${proc.output()}`);
      const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) });
      return res.status === 200 || res.status === 503;
    },
    { timeoutMs, intervalMs: 100, message: `${proc.name} answering /healthz` },
  );
}

// ---------------------------------------------------------------------------------------------
// Runs

export const TERMINAL = ["succeeded", "failed", "stopped"] as const;

export interface RunView {
  id: string;
  sessionId: string;
  task: string;
  workspace: string;
  status: string;
  reason: string | null;
  summary: string | null;
  iteration: number;
  progress: string | null;
  budget: {
    maxIterations: number;
    maxMinutes: number;
    elapsedMs: number;
    remainingIterations: number;
    deadlineAt: string | null;
  };
  metrics: { iterations: number; validationFailures: number };
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

export interface IterationView {
  n: number;
  attempt: number;
  status: string;
  outcome: string | null;
  prompt: string;
  agent: { exitCode: number | null; output: string; durationMs: number } | null;
  validation: { command: string; exitCode: number | null; durationMs: number; output: string }[];
  feedback: string | null;
  startedAt: string;
  finishedAt: string | null;
}

export interface EventView {
  seq: number;
  type: string;
  at: string;
  data: Record<string, unknown> & {
    budget: { elapsedMs: number; remainingIterations: number; reason?: string };
  };
}

/** Events have gap-free `seq` from 1, a time, and the budget snapshot in their data. */
export function expectWellFormedEvents(events: EventView[]): void {
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  for (const e of events) {
    expect(e.data.budget, `budget of event ${e.seq} (${e.type})`).toMatchObject({
      elapsedMs: expect.any(Number),
      remainingIterations: expect.any(Number),
    });
    // The same snapshot, spread into the data itself.
    expect(e.data, `data of event ${e.seq} (${e.type})`).toMatchObject({
      elapsedMs: e.data.budget.elapsedMs,
      remainingIterations: e.data.budget.remainingIterations,
    });
    if (e.data.budget.reason !== undefined) {
      expect(e.data.reason, `reason of event ${e.seq} (${e.type})`).toBe(e.data.budget.reason);
    }
    expect(Number.isNaN(Date.parse(e.at)), `time of event ${e.seq}`).toBe(false);
  }
}

/** A command agent body with the given command (and no cooldown unless asked). */
export function commandRun(
  command: string,
  rest: Record<string, unknown> = {},
): Record<string, unknown> {
  return { task: "e2e task", agent: { type: "command", command }, cooldownMs: 0, ...rest };
}

/** POST /api/runs; asserts the 202 and returns its body. */
export async function submit(
  stack: Stack,
  body: Record<string, unknown>,
): Promise<{ id: string; sessionId: string }> {
  const res = await stack.api("POST", "/api/runs", body);
  if (res.status !== 202) {
    throw new Error(`POST /api/runs answered ${res.status}: ${JSON.stringify(res.body)}`);
  }
  return res.body;
}

export async function getRun(stack: Stack, id: string): Promise<RunView> {
  const res = await stack.api<RunView>("GET", `/api/runs/${id}`);
  if (res.status !== 200) throw new Error(`GET /api/runs/${id} answered ${res.status}`);
  return res.body;
}

export async function getIterations(stack: Stack, id: string): Promise<IterationView[]> {
  const res = await stack.api<{ items: IterationView[] }>("GET", `/api/runs/${id}/iterations`);
  if (res.status !== 200) throw new Error(`GET /api/runs/${id}/iterations answered ${res.status}`);
  return res.body.items;
}

/** Every event of a run (following `after` pages). */
export async function getEvents(stack: Stack, id: string): Promise<EventView[]> {
  const all: EventView[] = [];
  for (;;) {
    const after = all.at(-1)?.seq ?? 0;
    const res = await stack.api<{ items: EventView[] }>(
      "GET",
      `/api/runs/${id}/events?after=${after}`,
    );
    if (res.status !== 200) throw new Error(`GET /api/runs/${id}/events answered ${res.status}`);
    if (res.body.items.length === 0) return all;
    all.push(...res.body.items);
  }
}

/** Waits until the run satisfies `predicate` and returns it. */
export async function waitForRun(
  stack: Stack,
  id: string,
  predicate: (run: RunView) => boolean,
  opts: WaitOptions = {},
): Promise<RunView> {
  let last: RunView | undefined;
  try {
    return await waitFor(async () => {
      last = await getRun(stack, id);
      return predicate(last) ? last : undefined;
    }, opts);
  } catch (error) {
    throw new Error(`${(error as Error).message}\nrun: ${JSON.stringify(last)}\n${stack.logs()}`);
  }
}

/** Waits until the run reaches `statuses` (default: any terminal status). */
export function waitForStatus(
  stack: Stack,
  id: string,
  statuses: readonly string[] = TERMINAL,
  opts: WaitOptions = {},
): Promise<RunView> {
  return waitForRun(
    stack,
    id,
    (r) => {
      if (statuses.includes(r.status)) return true;
      if ((TERMINAL as readonly string[]).includes(r.status)) {
        throw new StopWaiting(
          `run ${id} ended ${r.status} (${r.reason}: ${r.summary}), not ${statuses.join("|")}`,
        );
      }
      return false;
    },
    {
      message: `run ${id} reaching ${statuses.join("|")}`,
      ...opts,
    },
  );
}

/** Waits until the run has an event of `type` and returns it. */
export async function waitForEvent(
  stack: Stack,
  id: string,
  type: string,
  opts: WaitOptions = {},
): Promise<EventView> {
  return waitFor(async () => (await getEvents(stack, id)).find((e) => e.type === type), {
    message: `event ${type} of run ${id}`,
    ...opts,
  });
}

/** Single-quotes a string for `sh`. */
export function shq(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}
