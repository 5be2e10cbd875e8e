import { randomBytes } from "node:crypto";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { useFixture } from "./fixture";
import { type ApiResponse, type RequestOptions, request } from "./http";
import { LOOPRUN_BIN, type ManagedProcess, spawnManaged, tempDir, waitFor } from "./processes";
import { freePort } from "./redis-server";

export * from "./http";
export * from "./processes";
export * from "./run-api";

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
  /**
   * Nothing answers at redisUrl: the API is ready once it answers /healthz at all (503).
   * Otherwise the stack waits for a 200, so a first submit does not meet a Redis connection
   * still being made (503 "the queue") on a loaded machine.
   */
  redisDown?: boolean;
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

/** A stack started before the tests of the calling file (or block) and stopped after them. */
export function useStack(opts: () => StackOptions): Stack {
  return useFixture(
    "the stack",
    () => startStack(opts()),
    (stack) => stack.stop(),
  );
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
    await waitForHealthy(url, apiProcess, { acceptUnavailable: opts.redisDown === true });
    for (let i = 0; i < (opts.workers ?? 1); i++) stack.startWorker();
  } catch (error) {
    const output = logs();
    await stack.stop();
    throw new Error(`${(error as Error).message}\n${output}`);
  }
  return stack;
}

/**
 * Polls GET /healthz until the API answers it with 200 (Redis and the database connected), or
 * at all when `acceptUnavailable` (503: a test that starts it with Redis down); fails at once
 * if the process exits first.
 */
export async function waitForHealthy(
  url: string,
  proc: ManagedProcess,
  { acceptUnavailable = false, timeoutMs = 45_000 } = {},
): Promise<void> {
  await waitFor(
    async () => {
      if (proc.hasExited()) throw new Error(`${proc.name} exited: ${proc.output()}`);
      const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) });
      return res.status === 200 || (acceptUnavailable && res.status === 503);
    },
    {
      timeoutMs,
      intervalMs: 100,
      message: `${proc.name} answering /healthz${acceptUnavailable ? "" : " with 200"}`,
    },
  );
}
