// Helpers for the fault-injection tests: more API processes on one stack, finding the worker
// that holds a run, and the checks that say "recorded exactly once".
import { readFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { expect } from "vitest";
import { freePort } from "./redis-server";
import {
  type ApiResponse,
  commandRun,
  type EventView,
  type IterationView,
  isAlive,
  LOOPRUN_BIN,
  type ManagedProcess,
  type RequestOptions,
  type RunView,
  readPid,
  request,
  type Stack,
  spawnManaged,
  submit,
  waitFor,
  waitForHealthy,
  waitForStatus,
} from "./stack";

/** An agent whose first attempt records its pid and sleeps; a resumed attempt ends at once. */
export const RESUMABLE_AGENT =
  "if [ -f started ]; then echo resumed; else touch started; echo $$ > agent.pid; exec sleep 300; fi";

/**
 * Submits a run of the command agent `agent` (test command `true` unless `body` says otherwise)
 * and waits until it runs and its agent has written `agent.pid` in the workspace.
 */
export async function submitUntilAgentRuns(
  stack: Stack,
  agent: string,
  body: Record<string, unknown> = {},
  wait: { message?: string; timeoutMs?: number } = {},
): Promise<{ id: string; running: RunView; agentPid: number }> {
  const { id } = await submit(stack, commandRun(agent, { testCommand: "true", ...body }));
  const running = await waitForStatus(stack, id, ["running"]);
  const agentPid = await waitFor(() => readPid(join(running.workspace, "agent.pid")), {
    message: wait.message ?? "the agent writing its pid",
    ...(wait.timeoutMs !== undefined ? { timeoutMs: wait.timeoutMs } : {}),
  });
  return { id, running, agentPid };
}

/** Short leases: a dead or paused worker's run is taken over within seconds. */
export const FAST_RECOVERY = {
  LOOPRUN_LOCK_MS: "2000",
  LOOPRUN_STALLED_INTERVAL_MS: "1000",
  LOOPRUN_RECONCILE_MS: "1000",
};
/** Recovery needs a lease to expire and a stalled check; the machine may be busy. */
export const RECOVERY = { timeoutMs: 90_000 };
/** Workers log at info: their "run step done" lines show what a paused worker did later. */
export const WORKER_ENV = { LOG_LEVEL: "info" };

/** One more `looprun api` process on a stack's database, Redis and queue prefix. */
export interface ApiProcess {
  url: string;
  proc: ManagedProcess;
  // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
  api<T = any>(
    method: string,
    path: string,
    body?: unknown,
    opts?: RequestOptions,
  ): Promise<ApiResponse<T>>;
  stop(): Promise<void>;
}

/** Starts another API process with the stack's environment on its own port. */
export async function startApiProcess(stack: Stack, name = "api 2"): Promise<ApiProcess> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const proc = spawnManaged(name, process.execPath, [LOOPRUN_BIN, "api"], {
    env: { ...stack.env, PORT: String(port) },
  });
  try {
    await waitForHealthy(url, proc);
  } catch (error) {
    await proc.stop("SIGKILL");
    throw new Error(`${(error as Error).message}\n${proc.output()}`);
  }
  return {
    url,
    proc,
    api: (method, path, body, opts) => request(url, method, path, body, opts),
    async stop() {
      await proc.stop();
    },
  };
}

/** The stack's worker process with this pid (the agent wrote `$LOOPRUN_WORKER_PID`). */
export function workerWithPid(stack: Stack, pid: number): ManagedProcess {
  const worker = stack.workers.find((w) => w.pid === pid);
  if (!worker) {
    throw new Error(
      `no worker of the stack has pid ${pid} (workers: ${stack.workers.map((w) => w.pid).join(", ")})`,
    );
  }
  return worker;
}

/** Worker processes of the stack that are still running. */
export function liveWorkers(stack: Stack): ManagedProcess[] {
  return stack.workers.filter((w) => !w.hasExited());
}

/** Starts workers until `count` of them run (with `env` for the new ones). */
export function ensureWorkers(stack: Stack, count: number, env?: Record<string, string>): void {
  while (liveWorkers(stack).length < count) stack.startWorker(env);
}

/**
 * Runs `fn` while `count` workers are kept alive: one that dies (its run's agent killed it, say)
 * is started again, every 200 ms.
 */
export async function withWorkersKeptAlive<T>(
  stack: Stack,
  count: number,
  env: Record<string, string>,
  fn: () => Promise<T>,
): Promise<T> {
  let supervising = true;
  const supervisor = (async () => {
    while (supervising) {
      ensureWorkers(stack, count, env);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  try {
    return await fn();
  } finally {
    supervising = false;
    await supervisor;
  }
}

/** SIGKILLs a process group, if it is still there. */
export function killGroup(pgid: number | undefined): void {
  if (pgid === undefined) return;
  try {
    process.kill(-pgid, "SIGKILL");
  } catch {
    // already gone
  }
}

/** Waits until the process is dead (killed processes take a moment to be reaped). */
export async function waitForDeath(pid: number, what: string, timeoutMs = 15_000): Promise<void> {
  await waitFor(() => !isAlive(pid), { timeoutMs, message: `${what} (pid ${pid}) to be dead` });
}

/**
 * Iterations are recorded exactly once: numbers are contiguous from 1, each number has exactly
 * one record that is not `abandoned` (the last attempt), and its attempts are 1, 2, … in order,
 * every earlier attempt abandoned. Returns `[n, attempt, status]` rows for further checks.
 */
export function expectIterationsOnce(iterations: IterationView[]): [number, number, string][] {
  const rows = iterations.map((it): [number, number, string] => [it.n, it.attempt, it.status]);
  const numbers = [...new Set(iterations.map((it) => it.n))];
  expect(numbers, `iteration numbers of ${JSON.stringify(rows)}`).toEqual(
    numbers.map((_, i) => i + 1),
  );
  for (const n of numbers) {
    const records = iterations.filter((it) => it.n === n);
    expect(
      records.map((it) => it.attempt),
      `attempts of iteration ${n} in ${JSON.stringify(rows)}`,
    ).toEqual(records.map((_, i) => i + 1));
    const kept = records.filter((it) => it.status !== "abandoned");
    expect(
      kept.length,
      `records of iteration ${n} that are not abandoned in ${JSON.stringify(rows)}`,
    ).toBeLessThanOrEqual(1);
    // Only the last attempt may stand; earlier attempts were interrupted.
    expect(
      records.slice(0, -1).every((it) => it.status === "abandoned"),
      `earlier attempts of iteration ${n} abandoned in ${JSON.stringify(rows)}`,
    ).toBe(true);
  }
  return rows;
}

/**
 * Whether no process holds the SQLite write lock right now: a `BEGIN IMMEDIATE` of our own gets
 * it at once. (A process paused inside a write transaction would block every writer.)
 */
export function dbWriteLockFree(databasePath: string): boolean {
  const db = new Database(databasePath, { fileMustExist: true });
  try {
    db.pragma("busy_timeout = 0");
    db.exec("BEGIN IMMEDIATE");
    db.exec("ROLLBACK");
    return true;
  } catch {
    return false;
  } finally {
    db.close();
  }
}

/**
 * Pauses a process (SIGSTOP) at a moment it holds no SQLite write lock: SQLite locks are not
 * leases, so a process paused inside a write transaction would stall every other writer until
 * it is continued. Retries (continuing it) when the pause landed inside a write.
 */
export async function pauseOutsideWrites(
  proc: ManagedProcess,
  databasePath: string,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    await waitFor(() => dbWriteLockFree(databasePath), {
      intervalMs: 20,
      message: "the SQLite write lock being free",
    });
    proc.child.kill("SIGSTOP");
    // Another process's write ends at once; the paused one's never would.
    const free = await waitFor(() => dbWriteLockFree(databasePath), {
      timeoutMs: 3000,
      intervalMs: 20,
    }).catch(() => false);
    if (free) return;
    const locks = readFileSync("/proc/locks", "utf8")
      .split("\n")
      .filter((line) => line.split(/\s+/).includes(String(proc.pid)));
    console.warn(
      `${proc.name} was paused inside a SQLite write (its locks: ${locks.join(" | ")}); retrying`,
    );
    proc.child.kill("SIGCONT");
    if (attempt >= 10) throw new Error(`${proc.name} kept being paused inside a write`);
  }
}

/** How many events of `type` a run has. */
export function countEvents(events: EventView[], type: string): number {
  return events.filter((e) => e.type === type).length;
}
