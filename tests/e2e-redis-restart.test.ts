// Fault injection through real processes (issue #5): Redis restarted mid-run — empty (jobs lost,
// locks gone) or on its data after an outage — and the guarantees that must survive it (the
// workers' faults: e2e-durability).
import { rmSync } from "node:fs";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  countEvents,
  ensureWorkers,
  expectIterationsOnce,
  FAST_RECOVERY,
  killGroup,
  liveWorkers,
  RECOVERY,
  RESUMABLE_AGENT,
  submitUntilAgentRuns,
  WORKER_ENV,
  waitForDeath,
} from "./support/cluster";
import { type RedisHandle, startRedis } from "./support/redis-server";
import {
  commandRun,
  expectWellFormedEvents,
  getEvents,
  getIterations,
  isAlive,
  readPid,
  type Stack,
  StopWaiting,
  startStack,
  submit,
  tempDir,
  waitFor,
  waitForEvent,
  waitForStatus,
} from "./support/stack";

/**
 * Redis keeps what it was told in its append-only file, written before it answers (`always`:
 * a kill -9 right after a write loses nothing), so a restart on its directory finds it.
 */
const APPEND_ONLY = ["--appendonly", "yes", "--appendfsync", "always"];

describe("Redis restarted mid-run (empty, or with its data)", () => {
  let redis: RedisHandle;
  let redisDir: string;
  let stack: Stack;

  beforeAll(async () => {
    redisDir = tempDir("looprun-redis-restart-");
    redis = await startRedis({ dir: redisDir, args: APPEND_ONLY });
    stack = await startStack({ redisUrl: redis.url, workers: 0, env: FAST_RECOVERY });
    ensureWorkers(stack, 1, WORKER_ENV);
  });

  afterAll(async () => {
    await stack?.stop();
    await redis?.stop();
    if (redisDir) rmSync(redisDir, { recursive: true, force: true });
  });

  /** Kills Redis (-9) and starts an empty one on the same port. */
  async function restartRedisEmpty(): Promise<void> {
    const { port } = redis;
    await redis.stop();
    rmSync(redisDir, { recursive: true, force: true });
    redisDir = tempDir("looprun-redis-restart-");
    redis = await startRedis({ port, dir: redisDir, args: APPEND_ONLY });
  }

  it("finishes a run whose delayed job (a cooldown) was lost: the reconciler enqueues it again", async () => {
    const worker = liveWorkers(stack)[0]!;
    const agent = 'if [ "$LOOPRUN_ITERATION" -ge 2 ]; then touch done; fi';
    const { id } = await submit(
      stack,
      commandRun(agent, { testCommand: "test -f done", cooldownMs: 3000 }),
    );
    await waitForEvent(stack, id, "cooldown_started", { timeoutMs: 60_000 });
    await restartRedisEmpty();

    const run = await waitForStatus(stack, id, undefined, RECOVERY);
    expect(run).toMatchObject({ status: "succeeded", reason: "success", iteration: 2 });
    // The same worker reconnected and finished it.
    expect(worker.hasExited()).toBe(false);
    const iterations = await getIterations(stack, id);
    expect(expectIterationsOnce(iterations)).toEqual([
      [1, 1, "failed"],
      [2, 1, "passed"],
    ]);
    const events = await getEvents(stack, id);
    expectWellFormedEvents(events);
    expect(countEvents(events, "iteration_started")).toBe(2);
    expect(countEvents(events, "run_finished")).toBe(1);
  }, 150_000);

  it("finishes a run whose active job was lost mid-iteration, running the iteration again", async () => {
    const worker = liveWorkers(stack)[0]!;
    const { id, agentPid } = await submitUntilAgentRuns(stack, RESUMABLE_AGENT);
    try {
      await restartRedisEmpty();
      const run = await waitForStatus(stack, id, undefined, RECOVERY);
      expect(run).toMatchObject({ status: "succeeded", reason: "success", iteration: 1 });
      expect(worker.hasExited()).toBe(false);
      const iterations = await getIterations(stack, id);
      expect(expectIterationsOnce(iterations)).toEqual([
        [1, 1, "abandoned"],
        [1, 2, "passed"],
      ]);
      await waitForDeath(agentPid, "the agent of the lost attempt");
      const events = await getEvents(stack, id);
      expectWellFormedEvents(events);
      expect(countEvents(events, "run_resumed")).toBe(1);
      expect(countEvents(events, "run_finished")).toBe(1);
    } finally {
      killGroup(agentPid);
    }
  }, 150_000);
  it("a worker told to stop while Redis is down ends, its iteration abandoned; the run finishes once Redis is back", async () => {
    for (const w of liveWorkers(stack)) await w.stop();
    const first = stack.startWorker(WORKER_ENV);
    const { id, agentPid } = await submitUntilAgentRuns(stack, RESUMABLE_AGENT);
    try {
      const { port } = redis;
      await redis.stop();
      await waitFor(() => first.output().includes("redis connection error"), {
        timeoutMs: 30_000,
        message: "the worker to notice its Redis is gone",
      });
      // BullMQ's graceful close waits for Redis: the worker must not.
      expect(await first.stop("SIGTERM", 60_000), first.output()).toEqual({
        code: 0,
        signal: null,
      });
      expect(first.output()).toContain("looprun worker closed");
      await waitForDeath(agentPid, "the agent of the worker that stopped");
      expect((await getIterations(stack, id)).map((it) => [it.n, it.attempt, it.status])).toEqual([
        [1, 1, "abandoned"],
      ]);

      rmSync(redisDir, { recursive: true, force: true });
      redisDir = tempDir("looprun-redis-restart-");
      redis = await startRedis({ port, dir: redisDir, args: APPEND_ONLY });
      ensureWorkers(stack, 1, WORKER_ENV);
      const run = await waitForStatus(stack, id, undefined, RECOVERY);
      expect(run).toMatchObject({ status: "succeeded", reason: "success", iteration: 1 });
      expect(expectIterationsOnce(await getIterations(stack, id))).toEqual([
        [1, 1, "abandoned"],
        [1, 2, "passed"],
      ]);
      const events = await getEvents(stack, id);
      expectWellFormedEvents(events);
      expect(countEvents(events, "run_finished")).toBe(1);
    } finally {
      killGroup(agentPid);
    }
  }, 150_000);

  it("keeps the lease of a run its own worker took again after Redis lost the job, and stops it by pub/sub", async () => {
    // One worker whose lock renewal is slow (so the reconciler, not the renewal, notices the
    // lost job) and whose DB poll is too slow to matter: stops must come by pub/sub.
    for (const w of liveWorkers(stack)) await w.stop();
    const lockMs = 30_000;
    const worker = stack.startWorker({
      ...WORKER_ENV,
      LOOPRUN_LOCK_MS: String(lockMs),
      LOOPRUN_STOP_POLL_MS: "120000",
    });
    const agent = [
      "if [ -f started ]; then echo $$ > agent2.pid; exec sleep 300; fi",
      "touch started; echo $$ > agent.pid; exec sleep 300",
    ].join("\n");
    const { id, running, agentPid } = await submitUntilAgentRuns(stack, agent);
    let agent2Pid: number | undefined;
    let client: Redis | undefined;
    try {
      await restartRedisEmpty();
      // The reconciler enqueues the run again; the same worker takes it, and its first step
      // of the run ends, fenced off.
      agent2Pid = await waitFor(() => readPid(join(running.workspace, "agent2.pid")), {
        ...RECOVERY,
        message: "the run taken again",
      });
      await waitFor(
        () =>
          worker
            .output()
            .split("\n")
            .some((line) => line.includes(id) && line.includes('"kind":"lease_lost"')),
        { timeoutMs: 30_000, message: "the first step of the run ending (lease_lost)" },
      );
      await waitForDeath(agentPid, "the first attempt's agent");

      // The lock of the second step is still renewed after the first one ended (BullMQ tracks
      // locks by job id), so it is not taken for stalled: its time to live goes up again.
      client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
      const lockKey = `${stack.prefix}:looprun-runs:${id}:lock`;
      let lowest = Number.POSITIVE_INFINITY;
      await waitFor(
        async () => {
          const ttl = await client!.pttl(lockKey);
          if (ttl < 0) throw new StopWaiting(`the lock of run ${id} expired (pttl ${ttl})`);
          if (ttl > lowest + 1000) return true;
          lowest = Math.min(lowest, ttl);
          return false;
        },
        { timeoutMs: lockMs, intervalMs: 200, message: "the second step's lock being renewed" },
      );
      expect((await getIterations(stack, id)).map((it) => [it.n, it.attempt, it.status])).toEqual([
        [1, 1, "abandoned"],
        [1, 2, "running"],
      ]);

      const asked = Date.now();
      const res = await stack.api("POST", `/api/runs/${id}/stop`);
      expect(res.status).toBe(202);
      const run = await waitForStatus(stack, id, ["stopped"], { timeoutMs: 30_000 });
      expect(Date.now() - asked, "time from the stop request to `stopped`").toBeLessThanOrEqual(
        10_000,
      );
      expect(run).toMatchObject({ status: "stopped", reason: "stopped" });
      expect(isAlive(agent2Pid)).toBe(false);
      const iterations = await getIterations(stack, id);
      expect(expectIterationsOnce(iterations)).toEqual([
        [1, 1, "abandoned"],
        [1, 2, "failed"],
      ]);
      expect(iterations[1]?.outcome).toBe("stopped");
      const events = await getEvents(stack, id);
      expectWellFormedEvents(events);
      expect(countEvents(events, "run_finished")).toBe(1);
    } finally {
      client?.disconnect();
      killGroup(agentPid);
      killGroup(agent2Pid);
    }
  }, 150_000);

  it("ends a run stopped during its cooldown while Redis was down once Redis is back, not at the cooldown's end", async () => {
    for (const w of liveWorkers(stack)) await w.stop();
    stack.startWorker(WORKER_ENV);
    const { id } = await submit(
      stack,
      commandRun("true", { testCommand: "false", cooldownMs: 600_000 }),
    );
    await waitForEvent(stack, id, "cooldown_started", { timeoutMs: 60_000 });
    const { port } = redis;
    await redis.stop();
    // The API cannot take the run's delayed job off the queue: the run is left `stopping`.
    const res = await stack.api("POST", `/api/runs/${id}/stop`);
    expect(res.status).toBe(202);
    expect(res.body.status).toBe("stopping");
    redis = await startRedis({ port, dir: redisDir, args: APPEND_ONLY });
    // The job came back with Redis, delayed for ten minutes: the reconciler ends the run.
    const run = await waitForStatus(stack, id, ["stopped"], RECOVERY);
    expect(run).toMatchObject({ status: "stopped", reason: "stopped" });
    const events = await getEvents(stack, id);
    expectWellFormedEvents(events);
    expect(countEvents(events, "run_finished")).toBe(1);
  }, 150_000);
});
