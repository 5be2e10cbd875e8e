import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { killGroup, RESUMABLE_AGENT, submitUntilAgentRuns, waitForDeath } from "./support/cluster";
import { freePort, type RedisHandle, startRedis } from "./support/redis-server";
import {
  commandRun,
  expectWellFormedEvents,
  getEvents,
  getIterations,
  getRun,
  isAlive,
  type Stack,
  startStack,
  submit,
  waitFor,
  waitForStatus,
} from "./support/stack";

/** POST /api/runs of a trivial run in `sessionId`, waiting up to `timeoutMs` for the answer. */
function postRun(stack: Stack, sessionId: string, timeoutMs: number) {
  return stack.api("POST", "/api/runs", commandRun("true", { sessionId, testCommand: "true" }), {
    timeoutMs,
  });
}

/**
 * A Redis of the describe block's own (its tests stop, freeze and restart it) and an API on it,
 * without workers; `own.redis` and `own.stack` once they have started.
 */
function withOwnRedis(): { redis: RedisHandle; stack: Stack } {
  const own = {} as { redis: RedisHandle; stack: Stack };
  beforeAll(async () => {
    own.redis = await startRedis();
    own.stack = await startStack({ redisUrl: own.redis.url, workers: 0 });
  });
  afterAll(async () => {
    own.redis?.process.kill("SIGCONT");
    await own.stack?.stop();
    await own.redis?.stop();
  });
  return own;
}

/** Until the API has connected to Redis (`/readyz` answers 200); resolves with that answer. */
function readyAgain(stack: Stack) {
  return waitFor(
    async () => {
      const res = await stack.api("GET", "/readyz");
      return res.status === 200 ? res : null;
    },
    { message: "/readyz answering 200 once the API has connected to Redis" },
  );
}

describe("Redis unreachable", () => {
  let stack: Stack;

  beforeAll(async () => {
    // Nothing listens on this port.
    const port = await freePort();
    stack = await startStack({
      redisUrl: `redis://127.0.0.1:${port}`,
      workers: 0,
      redisDown: true,
    });
  });

  afterAll(async () => {
    await stack?.stop();
  });

  it("reports redis down on /readyz and answers 503 to submissions, storing nothing", async () => {
    const health = await stack.api("GET", "/healthz");
    expect(health.status).toBe(503);
    expect(health.body).toEqual({ redis: "down", db: "up" });

    const ready = await stack.api("GET", "/readyz");
    expect(ready.status).toBe(503);
    expect(ready.body).toEqual({ redis: "down", db: "up" });

    const res = await postRun(stack, "no-redis", 10_000);
    expect(res.status).toBe(503);
    expect(res.body.error).toMatchObject({ code: "unavailable", message: expect.any(String) });

    // A new session without a sessionId, too.
    const anonymous = await stack.api(
      "POST",
      "/api/runs",
      commandRun("true", { testCommand: "true" }),
      {
        timeoutMs: 10_000,
      },
    );
    expect(anonymous.status).toBe(503);

    expect((await stack.api("GET", "/api/runs")).body).toEqual({ items: [], nextCursor: null });
    expect((await stack.api("GET", "/api/sessions/no-redis")).status).toBe(404);
    expect(readdirSync(stack.workspacesRoot)).toEqual([]);

    // Bad input is still a 400, not a 503.
    const bad = await stack.api("POST", "/api/runs", { task: "no agent", testCommand: "true" });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("invalid_request");
  });
});

describe("Redis going away, or not answering, and coming back", () => {
  const own = withOwnRedis();

  /** Once Redis answers again, /readyz says so and a run for `sessionId` is queued. */
  async function acceptsRunsAgain(sessionId: string): Promise<void> {
    await readyAgain(own.stack);
    const again = await submit(own.stack, commandRun("true", { sessionId, testCommand: "true" }));
    expect((await getRun(own.stack, again.id)).status).toBe("queued");
  }

  it("answers 503 while Redis is down and accepts runs again once it is back", async () => {
    // The stack waited for /healthz only: the API's queue connection may still be opening.
    const before = await readyAgain(own.stack);
    expect(before.body).toEqual({ redis: "up", db: "up" });
    const accepted = await submit(own.stack, commandRun("true", { testCommand: "true" }));

    const port = own.redis.port;
    await own.redis.stop();
    const down = await waitFor(
      async () => {
        const res = await own.stack.api("GET", "/readyz");
        return res.status === 503 ? res : undefined;
      },
      { message: "/readyz reporting redis down" },
    );
    expect(down.body).toEqual({ redis: "down", db: "up" });

    const refused = await postRun(own.stack, "while-down", 10_000);
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe("unavailable");
    const list = await own.stack.api("GET", "/api/runs");
    expect(list.body.items.map((r: { id: string }) => r.id)).toEqual([accepted.id]);
    expect((await own.stack.api("GET", "/api/sessions/while-down")).status).toBe(404);
    expect(existsSync(join(own.stack.workspacesRoot, "while-down"))).toBe(false);

    own.redis = await startRedis({ port });
    await acceptsRunsAgain("while-down");
  });

  it("answers 503 within seconds, storing nothing, while a connected Redis does not answer", async () => {
    await readyAgain(own.stack);
    const runIds = async () =>
      (await own.stack.api("GET", "/api/runs")).body.items.map((r: { id: string }) => r.id);
    const before = await runIds();
    // Frozen, not gone: the connection stays open and nothing comes back.
    own.redis.process.kill("SIGSTOP");
    try {
      // Without an answer the requests time out below (20 s): the API must answer first.
      const ready = await own.stack.api("GET", "/readyz", undefined, { timeoutMs: 20_000 });
      expect(ready).toMatchObject({ status: 503, body: { redis: "down", db: "up" } });
      const refused = await postRun(own.stack, "frozen", 20_000);
      expect(refused.status).toBe(503);
      expect(refused.body.error.code).toBe("unavailable");
      expect(await runIds()).toEqual(before);
      expect((await own.stack.api("GET", "/api/sessions/frozen")).status).toBe(404);
    } finally {
      own.redis.process.kill("SIGCONT");
    }
    await acceptsRunsAgain("frozen");
  });
});

describe("worker shutdown and crash", () => {
  let stack: Stack;

  beforeAll(async () => {
    stack = await startStack({ redisUrl: inject("redisUrl"), workers: 1 });
  });

  afterAll(async () => {
    await stack?.stop();
  });

  it("hands the iteration in flight back on SIGTERM; another worker resumes and finishes the run", async () => {
    // First attempt: records its pid and sleeps; a resumed attempt finds `started` and is quick.
    const agent =
      "if [ -f started ]; then echo resumed; else touch started; echo $$ > agent.pid; sleep 30; touch slept; fi";
    const { id, running, agentPid } = await submitUntilAgentRuns(stack, agent);
    expect(isAlive(agentPid)).toBe(true);

    const [first] = stack.workers;
    // What its snapshot store made ahead (spare-files.ts, spare-repositories.ts) is removed as
    // it closes.
    const snapshots = join(stack.dir, "snapshots");
    const spares = () => [
      ...readdirSync(join(snapshots, "objects")).filter((name) =>
        name.startsWith(`tmp_spare_${first!.pid}_`),
      ),
      ...readdirSync(snapshots).filter((name) => name.startsWith(`.spare_${first!.pid}_`)),
    ];
    await waitFor(
      () =>
        (spares().length > 0 && spares().some((name) => name.startsWith(".spare_"))) || undefined,
      { message: "the worker's spare files and git dir" },
    );
    const exit = await first!.stop("SIGTERM");
    expect(exit, first!.output()).toEqual({ code: 0, signal: null });
    expect(spares()).toEqual([]);
    // It did not wait for the agent: the agent was killed before its sleep ended (its pid was
    // seen alive for a moment after the worker's exit once, on a loaded machine: its death is
    // waited for, seconds against the sleep's 30).
    await waitFor(() => !isAlive(agentPid) || undefined, {
      timeoutMs: 5_000,
      message: "the handed-back agent to be dead",
    });
    expect(existsSync(join(running.workspace, "slept"))).toBe(false);

    const handedBack = await getRun(stack, id);
    expect(handedBack.status).toBe("running");
    const abandoned = await getIterations(stack, id);
    expect(abandoned.map((it) => [it.n, it.attempt, it.status])).toEqual([[1, 1, "abandoned"]]);
    expect(abandoned[0]?.finishedAt).not.toBeNull();

    stack.startWorker();
    const run = await waitForStatus(stack, id);
    expect(run).toMatchObject({
      status: "succeeded",
      reason: "success",
      iteration: 1,
      metrics: { iterations: 1 },
    });

    const iterations = await getIterations(stack, id);
    expect(iterations.map((it) => [it.n, it.attempt, it.status, it.outcome])).toEqual([
      [1, 1, "abandoned", "stopped"],
      [1, 2, "passed", "complete"],
    ]);
    expect(iterations[1]?.agent?.output).toContain("resumed");
    expect(existsSync(join(running.workspace, "slept"))).toBe(false);

    const events = await getEvents(stack, id);
    expectWellFormedEvents(events);
    const types = events.map((e) => e.type);
    expect(types.filter((t) => t === "run_started")).toHaveLength(1);
    const resumed = events.filter((e) => e.type === "run_resumed");
    expect(resumed).toHaveLength(1);
    expect(resumed[0]?.data).toMatchObject({ iteration: 1, abandonedAttempt: 1 });
    expect(
      events
        .filter((e) => e.type === "iteration_started")
        .map((e) => [e.data.iteration, e.data.attempt]),
    ).toEqual([
      [1, 1],
      [1, 2],
    ]);
    expect(types.indexOf("run_resumed")).toBeLessThan(types.lastIndexOf("iteration_started"));
    expect(types.at(-1)).toBe("run_finished");
  });

  it("resumes the run of a worker killed with SIGKILL on another worker, killing its orphaned agent", async () => {
    // The worker that crashes holds a short lease, so its run is taken over within seconds.
    await stack.stopWorkers();
    const doomed = stack.startWorker({
      LOOPRUN_LOCK_MS: "4000",
      LOOPRUN_STALLED_INTERVAL_MS: "1000",
    });
    const { id, agentPid } = await submitUntilAgentRuns(stack, RESUMABLE_AGENT);
    const objects = join(stack.dir, "snapshots", "objects");
    const doomedSpares = () =>
      readdirSync(objects).filter((name) => name.startsWith(`tmp_spare_${doomed.pid}_`));
    try {
      await waitFor(() => doomedSpares().length > 0 || undefined, {
        message: "the doomed worker's spare files",
      });
      expect((await doomed.stop("SIGKILL")).signal).toBe("SIGKILL");
      // Left by the kill; removed by the next worker that keeps spares in the store.
      expect(doomedSpares().length).toBeGreaterThan(0);
      // The crashed worker's agent runs on in its own process group, until the run resumes.
      expect(isAlive(agentPid)).toBe(true);

      stack.startWorker({ LOOPRUN_STALLED_INTERVAL_MS: "1000" });
      const run = await waitForStatus(stack, id, undefined, { timeoutMs: 60_000 });
      expect(run).toMatchObject({ status: "succeeded", reason: "success", iteration: 1 });
      const iterations = await getIterations(stack, id);
      expect(iterations.map((it) => [it.n, it.attempt, it.status, it.outcome])).toEqual([
        [1, 1, "abandoned", "error"],
        [1, 2, "passed", "complete"],
      ]);
      expect(iterations[1]?.agent?.output).toContain("resumed");
      expect(doomedSpares()).toEqual([]);
      // The worker that resumed the run killed the orphaned agent of the crashed one.
      await waitForDeath(agentPid, "the orphaned agent");
      const events = await getEvents(stack, id);
      expectWellFormedEvents(events);
      expect(events.filter((e) => e.type === "run_resumed").map((e) => e.data)).toEqual([
        expect.objectContaining({ iteration: 1, abandonedAttempt: 1 }),
      ]);
      expect(events.filter((e) => e.type === "run_finished")).toHaveLength(1);
    } finally {
      killGroup(agentPid);
    }
  }, 120_000);
});

describe("API shutdown with a submit in flight", () => {
  const own = withOwnRedis();

  it("answers it before the queue and the database close, storing nothing it refused", async () => {
    await readyAgain(own.stack);
    // Redis frozen: the submit's run is written, its enqueue waits for Redis' answer (3 s).
    own.redis.process.kill("SIGSTOP");
    const answer = postRun(own.stack, "in-flight", 20_000).catch((error: unknown) => error);
    await waitFor(async () => (await own.stack.api("GET", "/api/runs")).body.items.length === 1, {
      message: "the submit's run written, its enqueue waiting",
    });
    const exit = await own.stack.apiProcess.stop("SIGTERM");
    // Answered (the enqueue timed out), not cut off; the API then closed and exited.
    const res = await answer;
    expect(res).toMatchObject({ status: 503, body: { error: { code: "unavailable" } } });
    expect(exit, own.stack.apiProcess.output()).toEqual({ code: 0, signal: null });
    const db = new Database(own.stack.databasePath, { readonly: true });
    try {
      expect(db.prepare("select count(*) as n from runs").get()).toEqual({ n: 0 });
    } finally {
      db.close();
    }
  });
});
