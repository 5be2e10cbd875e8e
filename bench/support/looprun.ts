import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import {
  type BenchProcess,
  baseEnv,
  freePort,
  REPO_ROOT,
  spawnTracked,
  tempDir,
  waitUntil,
} from "./processes";

let looprunRoot = REPO_ROOT;

/**
 * Runs the API and workers of another checkout (e.g. a copy without a fix, for a before/after
 * comparison); the bench itself and its baselines stay this one's.
 */
export function setLooprunRoot(dir: string): void {
  looprunRoot = dir;
}

export function looprunRootDir(): string {
  return looprunRoot;
}

let defaultNodeArgs: string[] = [];

/** CPU-profiles every API and worker process into `dir` (`node --cpu-prof`). */
export function setProfileDir(dir: string): void {
  defaultNodeArgs = ["--cpu-prof", `--cpu-prof-dir=${dir}`];
}

/** The `looprun` CLI, as a user runs it. */
const looprunBin = () => join(looprunRoot, "apps/cli/bin/looprun.js");

export interface StackConfig {
  redisUrl: string;
  /** Defaults to a new temp dir with `looprun.db` in it. */
  databasePath?: string;
  /** Extra environment for every process. */
  env?: Record<string, string>;
  /** Node options for the API and workers, e.g. `--cpu-prof` (see `--profile` in run.ts). */
  nodeArgs?: string[];
}

/** An API process and any number of worker processes on one DB file, one Redis and one prefix. */
export interface BenchStack {
  url: string;
  port: number;
  dir: string;
  databasePath: string;
  prefix: string;
  api: BenchProcess;
  workers: BenchProcess[];
  /** Starts a worker and resolves once it takes jobs ("looprun worker ready"). */
  startWorker(extra?: Record<string, string>): Promise<BenchProcess>;
  stopWorkers(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The API with the per-client rate limit off (a load test comes from one address) and the
 * workers at their default log level, as shipped.
 */
export async function startStack(config: StackConfig): Promise<BenchStack> {
  const dir = tempDir("looprun-bench-stack-");
  const workspaces = join(dir, "workspaces");
  mkdirSync(workspaces);
  const databasePath = config.databasePath ?? join(dir, "looprun.db");
  const prefix = `bench-${randomBytes(5).toString("hex")}`;
  const port = await freePort();
  const env: Record<string, string | undefined> = {
    ...baseEnv(),
    HOST: "127.0.0.1",
    PORT: String(port),
    DATABASE_PATH: databasePath,
    WORKSPACES_ROOT: workspaces,
    REDIS_URL: config.redisUrl,
    LOOPRUN_QUEUE_PREFIX: prefix,
    RATE_LIMIT_PER_MINUTE: "0",
    LOG_LEVEL: "info",
    ...config.env,
  };
  const url = `http://127.0.0.1:${port}`;
  const nodeArgs = config.nodeArgs ?? defaultNodeArgs;
  const api = spawnTracked("api", process.execPath, [...nodeArgs, looprunBin(), "api"], {
    env,
    cwd: looprunRoot,
  });
  const workers: BenchProcess[] = [];
  const stack: BenchStack = {
    url,
    port,
    dir,
    databasePath,
    prefix,
    api,
    workers,
    async startWorker(extra = {}) {
      const worker = spawnTracked(
        `worker ${workers.length + 1}`,
        process.execPath,
        [...nodeArgs, looprunBin(), "worker"],
        { env: { ...env, ...extra }, cwd: looprunRoot },
      );
      workers.push(worker);
      await worker.waitForLine((line) => line.includes("looprun worker ready"), 60_000);
      return worker;
    },
    async stopWorkers() {
      await Promise.all(workers.map((w) => w.stop()));
      workers.length = 0;
    },
    async stop() {
      await Promise.all([...workers, api].map((p) => p.stop()));
    },
  };
  try {
    await waitUntil(
      "the API answering /readyz (Redis and the database up)",
      async () => {
        if (api.hasExited()) throw new Error(`api exited: ${api.output()}`);
        const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1000) });
        return res.status === 200;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
  } catch (error) {
    await stack.stop();
    throw new Error(`${(error as Error).message}\n${api.output().slice(-2000)}`);
  }
  return stack;
}

// biome-ignore lint/suspicious/noExplicitAny: bench reads a few known fields of each body
export type Json = any;

export async function api(
  baseUrl: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

export async function submitRun(baseUrl: string, body: Record<string, unknown>): Promise<string> {
  const res = await api(baseUrl, "POST", "/api/runs", body);
  if (res.status !== 202) {
    throw new Error(`POST /api/runs answered ${res.status}: ${JSON.stringify(res.body)}`);
  }
  return res.body.id as string;
}

export interface RunView {
  id: string;
  status: string;
  reason: string | null;
  summary: string | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  metrics: { iterations: number };
}

const TERMINAL = new Set(["succeeded", "failed", "stopped"]);

/** Polls the run until it ends; it must end `succeeded`. */
export async function waitForSuccess(
  baseUrl: string,
  id: string,
  opts: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<RunView> {
  const run = await waitUntil(
    `run ${id} to finish`,
    async () => {
      const res = await api(baseUrl, "GET", `/api/runs/${id}`);
      const view = res.body as RunView;
      return TERMINAL.has(view.status) ? view : undefined;
    },
    { timeoutMs: opts.timeoutMs ?? 120_000, intervalMs: opts.intervalMs ?? 25 },
  );
  if (run.status !== "succeeded") {
    throw new Error(`run ${id} ended ${run.status} (${run.reason}: ${run.summary})`);
  }
  return run;
}

export interface EventView {
  seq: number;
  type: string;
  at: string;
}

export async function runEvents(baseUrl: string, id: string): Promise<EventView[]> {
  const res = await api(baseUrl, "GET", `/api/runs/${id}/events?after=0`);
  return res.body.items as EventView[];
}

/** Waits until no run is queued, running or stopping (all submitted runs have ended). */
export async function waitForIdle(baseUrl: string, timeoutMs: number): Promise<void> {
  await waitUntil(
    "every run to finish",
    async () => {
      for (const status of ["queued", "running", "stopping"]) {
        const res = await api(baseUrl, "GET", `/api/runs?status=${status}&limit=1`);
        if (res.body.items.length > 0) return false;
      }
      return true;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

/** A command-agent run body with no cooldown. */
export function commandRun(
  agent: string,
  test: string,
  rest: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    task: "bench",
    agent: { type: "command", command: agent },
    testCommand: test,
    cooldownMs: 0,
    ...rest,
  };
}
