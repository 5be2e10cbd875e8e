// Several API and worker processes on one database and one Redis (issue #5): concurrent
// submits, idempotent submits, stops through any API process, and many runs on many workers.
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  type ApiProcess,
  countEvents,
  ensureWorkers,
  expectIterationsOnce,
  killGroup,
  startApiProcess,
  waitForDeath,
} from "./support/cluster";
import {
  type ApiResponse,
  commandRun,
  expectWellFormedEvents,
  getEvents,
  getIterations,
  getRun,
  isAlive,
  readPid,
  type Stack,
  startStack,
  waitFor,
  waitForEvent,
  waitForStatus,
} from "./support/stack";

const unique = (name: string) => `${name}-${randomBytes(4).toString("hex")}`;

/** An agent that holds its run until a `release` file appears in the workspace. */
const HOLD_UNTIL_RELEASED = "while [ ! -f release ]; do sleep 0.1; done";

let stack: Stack;
/** A second API process: same DB, same Redis, another port. */
let api2: ApiProcess;

beforeAll(async () => {
  stack = await startStack({
    redisUrl: inject("redisUrl"),
    workers: 2,
    env: {
      // Nothing here recovers from a crash; a lease of a few seconds would be taken over now
      // and then on a saturated machine (a fenced takeover, but "processed twice").
      LOOPRUN_LOCK_MS: "15000",
      LOOPRUN_STALLED_INTERVAL_MS: "5000",
      LOOPRUN_RECONCILE_MS: "1000",
      // Stops must arrive by pub/sub: the workers' DB poll would take a minute.
      LOOPRUN_STOP_POLL_MS: "60000",
    },
  });
  api2 = await startApiProcess(stack);
});

afterAll(async () => {
  await api2?.stop();
  await stack?.stop();
});

const logs = () => `${stack.logs()}\n--- api 2\n${api2.proc.output().slice(-4000)}`;

describe("one active run per session across API processes", () => {
  it("accepts exactly one of 40 concurrent submits to one session through two APIs", async () => {
    const sessionId = unique("race");
    const body = commandRun(HOLD_UNTIL_RELEASED, { sessionId, testCommand: "true" });
    const replies = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        (i % 2 === 0 ? stack.api : api2.api)("POST", "/api/runs", body, { timeoutMs: 30_000 }),
      ),
    );
    const statuses = replies.map((r) => r.status);
    const accepted = replies.filter((r) => r.status === 202);
    expect(accepted, `statuses: ${statuses.join(",")}\n${logs()}`).toHaveLength(1);
    const winner = accepted[0]!.body.id as string;
    for (const r of replies.filter((x) => x.status !== 202)) {
      expect(r.status, JSON.stringify(r.body)).toBe(409);
      expect(r.body.error).toMatchObject({
        code: "run_already_active",
        activeRunId: winner,
        message: expect.any(String),
      });
    }
    // The DB holds one run for the session, whichever API is asked.
    for (const api of [stack.api, api2.api]) {
      const session = await api("GET", `/api/sessions/${sessionId}`);
      expect(session.body.activeRunId).toBe(winner);
      expect(session.body.runs.map((r: { id: string }) => r.id)).toEqual([winner]);
      const list = await api("GET", `/api/runs?sessionId=${sessionId}`);
      expect(list.body.items).toHaveLength(1);
    }

    const running = await waitForStatus(stack, winner, ["running"]);
    // Released once its agent runs (a run is `running` before its workspace is made).
    await waitForEvent(stack, winner, "agent_started");
    writeFileSync(join(running.workspace, "release"), "");
    expect(await waitForStatus(stack, winner)).toMatchObject({ status: "succeeded" });
    const session = await api2.api("GET", `/api/sessions/${sessionId}`);
    expect(session.body.activeRunId).toBeNull();
  });
});

describe("idempotent submit across API processes", () => {
  it("creates one run for the same key and body sent 10 times at once; another body gets 422", async () => {
    const key = unique("idem");
    // No sessionId: a request that was not deduplicated would create a run in a new session.
    const task = unique("idempotent task");
    const body = { ...commandRun("true", { testCommand: "true" }), task };
    const replies = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        (i % 2 === 0 ? stack.api : api2.api)("POST", "/api/runs", body, {
          headers: { "Idempotency-Key": key },
          timeoutMs: 30_000,
        }),
      ),
    );
    expect(
      replies.map((r) => r.status),
      JSON.stringify(replies.map((r) => r.body)),
    ).toEqual(Array(10).fill(202));
    const ids = new Set(replies.map((r) => r.body.id));
    expect(ids.size).toBe(1);
    const [id] = [...ids] as string[];
    const sessions = new Set(replies.map((r) => r.body.sessionId));
    expect(sessions.size).toBe(1);

    const all = await stack.api("GET", "/api/runs?limit=100");
    expect(all.body.items.filter((r: { task: string }) => r.task === task)).toHaveLength(1);
    const run = await waitForStatus(stack, id!);
    expect(run.status).toBe("succeeded");
    expect(await getIterations(stack, id!)).toHaveLength(1);

    // The key again, later, with the same body: the same run, nothing new, and the first
    // request's answer (the run has succeeded since).
    const replay = await api2.api("POST", "/api/runs", body, {
      headers: { "Idempotency-Key": key },
    });
    expect(replay.status).toBe(202);
    expect(replay.body).toEqual(replies[0]?.body);
    expect(replay.body).toMatchObject({ id, status: "queued" });
    // Another body with the key: refused, nothing stored.
    for (const api of [stack.api, api2.api]) {
      const other = await api(
        "POST",
        "/api/runs",
        { ...body, task: `${task} (changed)` },
        { headers: { "Idempotency-Key": key } },
      );
      expect(other.status).toBe(422);
      expect(other.body.error).toMatchObject({
        code: "idempotency_conflict",
        message: expect.any(String),
      });
    }
    const after = await stack.api("GET", "/api/runs?limit=100");
    expect(after.body.items.filter((r: { task: string }) => r.task.startsWith(task))).toHaveLength(
      1,
    );
  });
});

describe("stop from anywhere", () => {
  it("stops a running run through the API process that did not create it, within seconds", async () => {
    ensureWorkers(stack, 2);
    const created = await stack.api(
      "POST",
      "/api/runs",
      commandRun("sleep 300 & echo $! > bg.pid; echo $$ > agent.pid; wait", {
        testCommand: "true",
      }),
    );
    expect(created.status).toBe(202);
    const id = created.body.id as string;
    const running = await waitForStatus(stack, id, ["running"]);
    const agentPid = await waitFor(() => readPid(join(running.workspace, "agent.pid")), {
      message: "the agent writing its pid",
    });
    const bgPid = await waitFor(() => readPid(join(running.workspace, "bg.pid")), {
      message: "the agent's background process",
    });
    try {
      expect(isAlive(agentPid) && isAlive(bgPid)).toBe(true);
      const asked = Date.now();
      const res = await api2.api("POST", `/api/runs/${id}/stop`);
      expect(res.status).toBe(202);
      expect(res.body.id).toBe(id);
      expect(["stopping", "stopped"]).toContain(res.body.status);
      // The workers poll the DB once a minute here: only the pub/sub message is this fast.
      const run = await waitForStatus(stack, id, ["stopped"], { timeoutMs: 30_000 });
      const tookMs = Date.now() - asked;
      expect(tookMs, "time from the stop request to `stopped`").toBeLessThanOrEqual(10_000);
      expect(run).toMatchObject({ status: "stopped", reason: "stopped" });
      // `stopped` is only reported once the run's processes are dead.
      expect(isAlive(agentPid)).toBe(false);
      expect(isAlive(bgPid)).toBe(false);

      for (const api of [api2.api, stack.api]) {
        const again = await api("POST", `/api/runs/${id}/stop`);
        expect(again.status).toBe(202);
        expect(again.body).toEqual({ id, status: "stopped" });
      }
      const events = await getEvents(stack, id);
      expectWellFormedEvents(events);
      expect(countEvents(events, "stop_requested")).toBe(1);
      expect(countEvents(events, "run_finished")).toBe(1);
      expect(events.at(-1)?.data).toMatchObject({ status: "stopped", reason: "stopped" });
    } finally {
      killGroup(agentPid);
      await waitForDeath(agentPid, "the agent").catch(() => {});
    }
  });
});

describe("many runs on many workers", () => {
  it("runs 24 runs on 3 workers, each exactly once", async () => {
    ensureWorkers(stack, 3);
    const count = 24;
    // Half the runs converge in one iteration, half in two (some with a cooldown between).
    const bodies = Array.from({ length: count }, (_, i) => {
      const twice = i % 2 === 1;
      const agent = twice
        ? "echo $LOOPRUN_WORKER_PID >> workers; if [ -f once ]; then touch done; else touch once; fi"
        : "echo $LOOPRUN_WORKER_PID >> workers; touch done";
      return commandRun(agent, {
        sessionId: unique(`many-${i}`),
        testCommand: "test -f done",
        cooldownMs: twice && i % 4 === 1 ? 300 : 0,
      });
    });
    const replies: ApiResponse[] = await Promise.all(
      bodies.map((body, i) =>
        (i % 2 === 0 ? stack.api : api2.api)("POST", "/api/runs", body, { timeoutMs: 30_000 }),
      ),
    );
    expect(replies.map((r) => r.status)).toEqual(Array(count).fill(202));
    const ids = replies.map((r) => r.body.id as string);

    await waitFor(
      async () => {
        const runs = await Promise.all(ids.map((id) => getRun(stack, id)));
        return runs.every((r) => ["succeeded", "failed", "stopped"].includes(r.status));
      },
      { timeoutMs: 180_000, intervalMs: 500, message: "all 24 runs finishing" },
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n${logs()}`);
    });

    const usedWorkers = new Set<string>();
    for (const [i, id] of ids.entries()) {
      const expected = i % 2 === 1 ? 2 : 1;
      const run = await getRun(stack, id);
      expect(run, `run ${i}`).toMatchObject({
        status: "succeeded",
        reason: "success",
        iteration: expected,
        metrics: { iterations: expected },
      });
      const iterations = await getIterations(stack, id);
      const rows = expectIterationsOnce(iterations);
      // Never processed twice: no attempt 2, no abandoned iteration.
      expect(rows, `iterations of run ${i}`).toEqual(
        Array.from({ length: expected }, (_, k) => [
          k + 1,
          1,
          k + 1 === expected ? "passed" : "failed",
        ]),
      );
      const events = await getEvents(stack, id);
      expectWellFormedEvents(events);
      expect(countEvents(events, "run_started"), `run_started of run ${i}`).toBe(1);
      expect(countEvents(events, "run_resumed"), `run_resumed of run ${i}`).toBe(0);
      expect(countEvents(events, "iteration_started")).toBe(expected);
      expect(countEvents(events, "run_finished")).toBe(1);
      for (const pid of readFileSync(join(run.workspace, "workers"), "utf8").trim().split("\n")) {
        usedWorkers.add(pid);
      }
    }
    // The work was shared (the agents recorded the worker that ran them).
    expect(usedWorkers.size).toBeGreaterThanOrEqual(2);
    // And the reconciler, running every second on every worker, found nothing to repair: it
    // never enqueued one of these runs again (not even one that finished while it looked).
    const repaired = stack.workers
      .flatMap((w) => w.output().split("\n"))
      .filter((line) => line.includes("reconciled runs") && ids.some((id) => line.includes(id)));
    expect(repaired).toEqual([]);
  }, 240_000);
});
