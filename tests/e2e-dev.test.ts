import { readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { dirname, join } from "node:path";
import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { childPids, isAlive, REPO_ROOT } from "./support/processes";
import { freePort, startRedis } from "./support/redis-server";
import {
  LOOPRUN_BIN,
  type ManagedProcess,
  request,
  StopWaiting,
  spawnManaged,
  tempDir,
  waitFor,
} from "./support/stack";

// `looprun dev` (what `npm start` runs): its own redis-server, the API and the workers in one
// command, everything under `.looprun/` in the directory it runs in.

/** Processes running in `dir` (a managed redis-server runs in its data directory). */
function processesIn(dir: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readlinkSync(`/proc/${name}/cwd`) === dir) found.push(Number(name));
    } catch {
      // gone, or not ours to look at
    }
  }
  return found;
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function startDev(port: number, extraEnv: Record<string, string> = {}) {
  const cwd = tempDir("looprun-dev-");
  const { PATH, HOME, LANG, TMPDIR, USER, SHELL } = process.env;
  const proc = spawnManaged("looprun dev", process.execPath, [LOOPRUN_BIN, "dev"], {
    cwd,
    env: { PATH, HOME, LANG, TMPDIR, USER, SHELL, PORT: String(port), ...extraEnv },
  });
  // The managed Redis keeps its data next to the database.
  const redisDir = join(cwd, dirname(extraEnv.DATABASE_PATH ?? ".looprun/looprun.db"), "redis");
  cleanups.push(async () => {
    await proc.stop("SIGKILL");
    for (const pid of processesIn(redisDir)) process.kill(pid, "SIGKILL");
    rmSync(cwd, { recursive: true, force: true });
  });
  return { proc, cwd, redisDir };
}

/** Waits for `looprun dev`'s banner (everything started), failing at once if it exits. */
async function untilReady(proc: ManagedProcess): Promise<void> {
  await waitFor(
    () => {
      if (proc.hasExited()) throw new StopWaiting(`looprun dev exited:\n${proc.output()}`);
      return proc.stdout().includes("Press Ctrl-C to stop.");
    },
    { timeoutMs: 60_000, message: "looprun dev ready" },
  );
}

/** Polls the run until it has succeeded; its view. */
const untilSucceeded = (url: string, id: string, timeoutMs: number) =>
  waitFor(
    async () => {
      const res = await request(url, "GET", `/api/runs/${id}`);
      return res.body.status === "succeeded" ? res.body : undefined;
    },
    { timeoutMs, message: `run ${id} to succeed` },
  );

const exitOf = async (proc: ManagedProcess) => ({ ...(await proc.exited), output: proc.output() });

describe("looprun dev", () => {
  it("starts its Redis, the API and a worker, runs a loop, and leaves nothing running after Ctrl-C", async () => {
    const port = await freePort();
    // An API setting, and a variable of the user's own, in the one environment of both.
    const { proc, redisDir } = startDev(port, {
      LOOPRUN_SSE_HEARTBEAT_MS: "1000",
      LOOPRUN_SSE_POLL_MS: "200",
      AGENT_ENV_ALLOWLIST: "LOOPRUN_SSE_POLL_MS",
      LOOPRUN_CUSTOM: "custom1",
    });
    await untilReady(proc);
    const redisPids = processesIn(redisDir);
    expect(redisPids, proc.output()).toHaveLength(1);
    // The bundle is built once at the start: esbuild's service process is not kept (it stayed,
    // idle, for the process's life).
    await waitFor(() => childPids(proc.child.pid!, "esbuild").length === 0 || undefined, {
      timeoutMs: 10_000,
      message: "no esbuild process under looprun dev",
    });
    // Not on the CLI's default port: the suggested command says where the API is.
    expect(proc.stdout()).toContain(
      `\n  LOOPRUN_URL=http://127.0.0.1:${port} npx looprun submit --task "say hello"`,
    );

    const url = `http://127.0.0.1:${port}`;
    const submitted = await request(url, "POST", "/api/runs", {
      task: "count to two",
      agent: { type: "command", command: "env | grep ^LOOPRUN_ | sort > env.txt; echo x >> lines" },
      testCommand: '[ "$(wc -l < lines)" -ge 2 ]',
      cooldownMs: 0,
    });
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
    const run = await untilSucceeded(url, submitted.body.id, 30_000);
    expect(run.metrics.iterations).toBe(2);
    // The agent sees the run's variables and the user's, not the API's own settings.
    const names = readFileSync(join(run.workspace, "env.txt"), "utf8");
    expect(names).toContain(`LOOPRUN_RUN_ID=${run.id}`);
    expect(names).toContain("LOOPRUN_CUSTOM=custom1");
    expect(names).not.toContain("LOOPRUN_SSE_HEARTBEAT_MS");
    // Unless it is listed in AGENT_ENV_ALLOWLIST.
    expect(names).toContain("LOOPRUN_SSE_POLL_MS=200");

    proc.child.kill("SIGINT");
    const exit = await exitOf(proc);
    expect(exit.code, exit.output).toBe(0);
    expect(processesIn(redisDir)).toEqual([]);
  });

  it("stops in full when only the npm process of npm start gets SIGTERM, as a supervisor sends it", async () => {
    const port = await freePort();
    const dir = tempDir("looprun-npm-start-");
    const { PATH, HOME, LANG, TMPDIR, USER, SHELL } = process.env;
    // From the checkout, as the README says, with its state in a directory of its own.
    const proc = spawnManaged("npm start", "npm", ["start"], {
      cwd: REPO_ROOT,
      env: {
        ...{ PATH, HOME, LANG, TMPDIR, USER, SHELL, PORT: String(port) },
        DATABASE_PATH: join(dir, "looprun.db"),
        WORKSPACES_ROOT: join(dir, "workspaces"),
        LOOPRUN_SNAPSHOTS_DIR: join(dir, "snapshots"),
      },
    });
    const tree: number[] = [];
    cleanups.push(async () => {
      await proc.stop("SIGKILL");
      for (const pid of tree.filter(isAlive)) process.kill(pid, "SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    });
    await untilReady(proc);
    // Everything npm started, however deep: the script's shell (if it stayed), looprun dev, Redis.
    for (let parents = [proc.pid]; parents.length > 0; ) {
      parents = parents.flatMap((pid) => childPids(pid, ""));
      tree.push(...parents);
    }
    expect(tree.length, proc.output()).toBeGreaterThanOrEqual(2);
    proc.child.kill("SIGTERM");
    const exit = await exitOf(proc);
    expect(exit.output).toContain("SIGTERM received, shutting down");
    await waitFor(() => tree.every((pid) => !isAlive(pid)) || undefined, {
      timeoutMs: 30_000,
      message: `every process npm started to end (${tree.join(", ")})`,
    });
    expect(processesIn(join(dir, "redis"))).toEqual([]);
  });

  it("does not start its Redis again after a shutdown Redis was asked for", async () => {
    const port = await freePort();
    const { proc, redisDir } = startDev(port);
    await untilReady(proc);
    const redisUrl = /redis:\/\/127\.0\.0\.1:\d+/.exec(proc.stdout())?.[0];
    expect(redisUrl, proc.output()).toBeDefined();
    const client = new Redis(redisUrl as string, { lazyConnect: true, maxRetriesPerRequest: 0 });
    await client.connect();
    // SHUTDOWN closes the connection without an answer.
    await client.call("SHUTDOWN").catch(() => {});
    client.disconnect();
    await waitFor(() => processesIn(redisDir).length === 0 || undefined, {
      timeoutMs: 15_000,
      message: "the managed Redis to shut down",
    });
    // A clean exit (0) is not a death: nothing is started again.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(processesIn(redisDir)).toEqual([]);
    expect(proc.output()).not.toContain("starting it again");
    proc.child.kill("SIGINT");
    await exitOf(proc);
    expect(processesIn(redisDir)).toEqual([]);
  });

  it("starts its Redis again when it dies, and the runs it had go on", async () => {
    const port = await freePort();
    const { proc, redisDir } = startDev(port);
    await untilReady(proc);
    const url = `http://127.0.0.1:${port}`;
    const submitted = await request(url, "POST", "/api/runs", {
      task: "two slow iterations",
      agent: { type: "command", command: "sleep 1; echo x >> lines" },
      testCommand: '[ "$(wc -l < lines)" -ge 2 ]',
      cooldownMs: 0,
    });
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
    const [first] = processesIn(redisDir);
    expect(first, proc.output()).toBeDefined();
    process.kill(first as number, "SIGKILL");
    await waitFor(() => proc.output().includes("the managed redis-server is running again"), {
      timeoutMs: 30_000,
      message: "the managed Redis started again",
    });
    expect(proc.output()).toContain("the managed redis-server exited (SIGKILL)");
    const [second] = processesIn(redisDir);
    expect(second).not.toBe(first);
    // The run accepted before goes on, with its queue where the append-only file kept it.
    const run = await untilSucceeded(url, submitted.body.id, 60_000);
    expect(run.metrics.iterations).toBe(2);
    const ready = await request(url, "GET", "/readyz");
    expect(ready.body).toMatchObject({ redis: "up", db: "up" });
    proc.child.kill("SIGINT");
    const exit = await exitOf(proc);
    expect(exit.code, exit.output).toBe(0);
    expect(processesIn(redisDir)).toEqual([]);
  });

  it("stops on Ctrl-C while `looprun watch` follows a run (its stream reconnecting)", async () => {
    const port = await freePort();
    const { proc } = startDev(port);
    await untilReady(proc);
    const url = `http://127.0.0.1:${port}`;
    const submitted = await request(url, "POST", "/api/runs", {
      task: "goes on for a while",
      agent: { type: "command", command: "sleep 1" },
      testCommand: "false",
      cooldownMs: 500,
      maxIterations: 100,
    });
    expect(submitted.status).toBe(202);
    const { PATH, HOME } = process.env;
    const watch = spawnManaged(
      "looprun watch",
      process.execPath,
      [LOOPRUN_BIN, "watch", submitted.body.id],
      {
        env: { PATH, HOME, LOOPRUN_URL: url },
      },
    );
    cleanups.push(async () => {
      await watch.stop("SIGKILL");
    });
    await waitFor(() => watch.output().includes("iteration"), {
      timeoutMs: 30_000,
      message: "the watch to show the run",
    });

    proc.child.kill("SIGINT");
    // Before, it waited for the watch to go away: its stream, ended by the shutdown, came
    // back at once on the same connection, over and over.
    const exit = await exitOf(proc);
    expect(exit.code, exit.output).toBe(0);
    expect(watch.hasExited()).toBe(false);
  });

  it.each([
    ["its Redis starts", 1],
    ["its Redis has started and the API and the workers start", 100],
  ])("shuts down in full on a Ctrl-C that comes while %s", async (_, delayMs) => {
    const { proc, redisDir } = startDev(await freePort());
    await waitFor(
      () => {
        if (proc.hasExited()) throw new StopWaiting(`looprun dev exited:\n${proc.output()}`);
        return processesIn(redisDir).length === 1;
      },
      { timeoutMs: 60_000, intervalMs: 2, message: "the managed redis-server to be spawned" },
    );
    await new Promise((r) => setTimeout(r, delayMs));
    proc.child.kill("SIGINT");
    const exit = await exitOf(proc);
    expect(exit.code, `signal ${exit.signal}\n${exit.output}`).toBe(0);
    expect(exit.output).toContain("SIGINT received, shutting down");
    // A Redis stopped while it started ends by itself, soon after.
    await waitFor(() => processesIn(redisDir).length === 0, {
      timeoutMs: 15_000,
      message: "the managed redis-server to exit",
    });
  });

  it("shuts down in full on Ctrl-C after the reader of its output went away (looprun dev | head)", async () => {
    const { proc, redisDir } = startDev(await freePort());
    await untilReady(proc);
    expect(processesIn(redisDir)).toHaveLength(1);
    proc.child.stdout?.destroy();
    proc.child.stderr?.destroy();
    // Its "shutting down" line meets a closed pipe: it must not end it before its shutdown.
    proc.child.kill("SIGINT");
    const exit = await exitOf(proc);
    expect(exit.code, `signal ${exit.signal}`).toBe(0);
    expect(processesIn(redisDir)).toEqual([]);
  });

  it("keeps the managed Redis' data next to DATABASE_PATH, as the snapshots", async () => {
    const { proc, cwd, redisDir } = startDev(await freePort(), {
      DATABASE_PATH: "data/looprun.db",
    });
    await untilReady(proc);
    expect(redisDir).toBe(join(cwd, "data", "redis"));
    expect(processesIn(redisDir), proc.output()).toHaveLength(1);
    expect(proc.stdout()).toContain(`data in ${redisDir}`);
    // Only the workspaces' root (made at start-up) is in the default place: no data.
    expect(readdirSync(join(cwd, ".looprun"))).toEqual(["workspaces"]);

    proc.child.kill("SIGINT");
    const exit = await exitOf(proc);
    expect(exit.code, exit.output).toBe(0);
    expect(processesIn(redisDir)).toEqual([]);
  });

  it("does not print the password of the REDIS_URL it is given", async () => {
    const password = "dev-redis-password-0123456789";
    const redis = await startRedis({ args: ["--requirepass", password] });
    cleanups.push(() => redis.stop());
    const { proc } = startDev(await freePort(), {
      REDIS_URL: `redis://:${password}@127.0.0.1:${redis.port}`,
    });
    await untilReady(proc);
    expect(proc.stdout()).toContain(`Redis      redis://:xxxxx@127.0.0.1:${redis.port}`);
    expect(proc.output()).not.toContain(password);
  });

  it("refuses a bad setting, naming it, before it starts anything", async () => {
    const { proc, redisDir } = startDev(await freePort(), { WORKER_CONCURRENCY: "0" });
    const exit = await exitOf(proc);
    expect(exit.code).toBe(1);
    expect(exit.output).toContain("WORKER_CONCURRENCY");
    expect(processesIn(redisDir)).toEqual([]);
  });

  it("stops the Redis it started when the API cannot start (its port is taken)", async () => {
    const port = await freePort();
    const taken: Server = createServer();
    await new Promise<void>((listening) => taken.listen(port, "127.0.0.1", listening));
    cleanups.push(() => new Promise<void>((closed) => taken.close(() => closed())));

    const { proc, redisDir } = startDev(port, { HOST: "127.0.0.1" });
    const exit = await exitOf(proc);
    expect(exit.code).toBe(1);
    expect(exit.output).toContain("EADDRINUSE");
    expect(processesIn(redisDir)).toEqual([]);
  });
});

describe("looprun worker", () => {
  /** `looprun worker` on `redisUrl` in a directory of its own, killed and removed afterwards. */
  function startWorker(redisUrl: string, extraEnv: Record<string, string> = {}): ManagedProcess {
    const cwd = tempDir("looprun-worker-");
    const { PATH, HOME } = process.env;
    const proc = spawnManaged("looprun worker", process.execPath, [LOOPRUN_BIN, "worker"], {
      cwd,
      env: { PATH, HOME, REDIS_URL: redisUrl, ...extraEnv },
    });
    cleanups.push(async () => {
      await proc.stop("SIGKILL");
      rmSync(cwd, { recursive: true, force: true });
    });
    return proc;
  }

  /** Sends `signal` once the worker has logged a Redis connection error; resolves with its exit. */
  async function signalAfterRedisError(proc: ManagedProcess, signal: NodeJS.Signals) {
    await waitFor(() => proc.output().includes("redis connection error"), {
      timeoutMs: 60_000,
      message: "the worker to meet its Redis' absence",
    });
    proc.child.kill(signal);
    await waitFor(() => proc.hasExited(), {
      timeoutMs: 30_000,
      message: `the worker to exit on ${signal}`,
    });
    const exit = await exitOf(proc);
    expect(exit.code, `signal ${exit.signal}\n${exit.output}`).toBe(0);
    expect(exit.output).toContain(`${signal} received, shutting down`);
    return exit;
  }

  it("stops on Ctrl-C while its start waits for a Redis that does not answer", async () => {
    const proc = startWorker(`redis://127.0.0.1:${await freePort()}`);
    await signalAfterRedisError(proc, "SIGINT");
  });

  it("shuts down on SIGTERM after its Redis went away", async () => {
    const redis = await startRedis();
    cleanups.push(() => redis.stop());
    const proc = startWorker(redis.url, { LOG_LEVEL: "info" });
    await waitFor(
      () => {
        if (proc.hasExited()) throw new StopWaiting(`looprun worker exited:\n${proc.output()}`);
        return proc.output().includes("looprun worker ready");
      },
      { timeoutMs: 60_000, message: "the worker to start" },
    );
    await redis.stop();
    const exit = await signalAfterRedisError(proc, "SIGTERM");
    expect(exit.output).toContain("looprun worker closed");
    // Redis' errors are logged as log lines, not printed raw.
    expect(exit.output).not.toMatch(/^Error: /m);
  });
});
