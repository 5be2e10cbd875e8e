import { randomBytes } from "node:crypto";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, inject, it } from "vitest";
import {
  commandRun,
  expectWellFormedEvents,
  getEvents,
  getIterations,
  getRun,
  isAlive,
  readPid,
  submit,
  useStack,
  waitFor,
  waitForEvent,
  waitForStatus,
} from "./support/stack";

const stack = useStack(() => ({ redisUrl: inject("redisUrl") }));

const unique = (name: string) => `${name}-${randomBytes(4).toString("hex")}`;

/** An agent that holds its run until a `release` file appears in the workspace. */
const HOLD_UNTIL_RELEASED = "while [ ! -f release ]; do sleep 0.1; done";

describe("one active run per session", () => {
  it("refuses a second run while the session is busy, and accepts one once it is free", async () => {
    const sessionId = unique("busy");
    const first = await submit(
      stack,
      commandRun(HOLD_UNTIL_RELEASED, { sessionId, testCommand: "true" }),
    );
    const second = commandRun("touch second-ran", { sessionId, testCommand: "true" });

    // Busy from the moment it is accepted, and while it runs.
    const whileQueued = await stack.api("POST", "/api/runs", second);
    expect(whileQueued.status).toBe(409);
    expect(whileQueued.body.error).toMatchObject({
      code: "run_already_active",
      activeRunId: first.id,
    });

    const running = await waitForStatus(stack, first.id, ["running"]);
    const whileRunning = await stack.api("POST", "/api/runs", second);
    expect(whileRunning.status).toBe(409);
    expect(whileRunning.body.error).toMatchObject({
      code: "run_already_active",
      activeRunId: first.id,
      message: expect.any(String),
    });

    // The refused submissions stored nothing.
    const session = await stack.api("GET", `/api/sessions/${sessionId}`);
    expect(session.status).toBe(200);
    expect(session.body.activeRunId).toBe(first.id);
    expect(session.body.runs.map((r: { id: string }) => r.id)).toEqual([first.id]);
    expect(existsSync(join(running.workspace, "second-ran"))).toBe(false);

    // Released once its agent runs (a run is `running` before its workspace is made).
    await waitForEvent(stack, first.id, "agent_started");
    writeFileSync(join(running.workspace, "release"), "");
    expect(await waitForStatus(stack, first.id)).toMatchObject({ status: "succeeded" });

    const third = await submit(stack, second);
    expect(third.sessionId).toBe(sessionId);
    expect(third.id).not.toBe(first.id);
    const done = await waitForStatus(stack, third.id);
    expect(done).toMatchObject({ status: "succeeded", workspace: running.workspace });
    expect(existsSync(join(running.workspace, "second-ran"))).toBe(true);

    const after = await stack.api("GET", `/api/sessions/${sessionId}`);
    expect(after.body.activeRunId).toBeNull();
    expect(after.body.runs.map((r: { id: string }) => r.id)).toEqual([third.id, first.id]);
  });

  it("accepts exactly one of several concurrent submits to a new session", async () => {
    const sessionId = unique("race");
    const body = commandRun(HOLD_UNTIL_RELEASED, { sessionId, testCommand: "true" });
    const replies = await Promise.all(
      Array.from({ length: 6 }, () => stack.api("POST", "/api/runs", body)),
    );
    const accepted = replies.filter((r) => r.status === 202);
    expect(accepted).toHaveLength(1);
    const winner = accepted[0]?.body.id as string;
    for (const r of replies.filter((x) => x.status !== 202)) {
      expect(r.status).toBe(409);
      expect(r.body.error).toMatchObject({ code: "run_already_active", activeRunId: winner });
    }
    const session = await stack.api("GET", `/api/sessions/${sessionId}`);
    expect(session.body.runs).toHaveLength(1);

    const res = await stack.api("POST", `/api/runs/${winner}/stop`);
    expect(res.status).toBe(202);
    await waitForStatus(stack, winner, ["stopped"], { timeoutMs: 15_000 });
  });
});

describe("stop", () => {
  it("stops a running agent, killing all of its processes, those that left its process group too", async () => {
    const { id } = await submit(
      stack,
      commandRun(
        "sleep 300 & echo $! > bg.pid; setsid sleep 301 & echo $! > escaped.pid; echo $$ > agent.pid; exec sleep 300",
        { testCommand: "true" },
      ),
    );
    const started = await waitForStatus(stack, id, ["running"]);
    const agentPid = await waitFor(() => readPid(join(started.workspace, "agent.pid")), {
      message: "the agent writing its pid",
    });
    const bgPid = readPid(join(started.workspace, "bg.pid"));
    expect(bgPid).toBeDefined();
    expect(isAlive(agentPid)).toBe(true);
    expect(isAlive(bgPid!)).toBe(true);
    // In a session and process group of its own (setsid), out of reach of a group's kill.
    const escapedPid = readPid(join(started.workspace, "escaped.pid"));
    expect(escapedPid).toBeDefined();
    expect(isAlive(escapedPid!)).toBe(true);

    const res = await stack.api("POST", `/api/runs/${id}/stop`);
    expect(res.status).toBe(202);
    expect(res.body.id).toBe(id);
    expect(["stopping", "stopped"]).toContain(res.body.status);

    // A second request while it is stopping is fine too (idempotent).
    const again = await stack.api("POST", `/api/runs/${id}/stop`);
    expect(again.status).toBe(202);
    expect(["stopping", "stopped"]).toContain(again.body.status);

    const run = await waitForStatus(stack, id, ["stopped"], { timeoutMs: 15_000 });
    expect(run).toMatchObject({ status: "stopped", reason: "stopped" });
    // `stopped` is only reported once the command's process group is dead; what escaped it
    // (its own session) has been sent SIGKILL by then, and is gone a moment later.
    expect(isAlive(agentPid)).toBe(false);
    expect(isAlive(bgPid!)).toBe(false);
    await waitFor(() => !isAlive(escapedPid!), {
      timeoutMs: 10_000,
      message: `the escaped process (pid ${escapedPid}) to be dead`,
    });

    const iterations = await getIterations(stack, id);
    expect(iterations).toHaveLength(1);
    expect(iterations[0]).toMatchObject({ n: 1, outcome: "stopped" });
    const events = await getEvents(stack, id);
    expectWellFormedEvents(events);
    const types = events.map((e) => e.type);
    expect(types.filter((t) => t === "stop_requested")).toHaveLength(1);
    expect(types.indexOf("stop_requested")).toBeGreaterThan(types.indexOf("agent_started"));
    expect(types.at(-1)).toBe("run_finished");
    expect(types.filter((t) => t === "run_finished")).toHaveLength(1);

    // Once it is stopped, a stop answers `stopped` again and records nothing.
    const late = await stack.api("POST", `/api/runs/${id}/stop`);
    expect(late.status).toBe(202);
    expect(late.body).toEqual({ id, status: "stopped" });
    expect((await getEvents(stack, id)).length).toBe(events.length);
  });

  it("stops a queued run at once", async () => {
    await stack.stopWorkers();
    try {
      const { id } = await submit(stack, commandRun("touch ran", { testCommand: "true" }));
      expect((await getRun(stack, id)).status).toBe("queued");

      const res = await stack.api("POST", `/api/runs/${id}/stop`);
      expect(res.status).toBe(202);
      expect(res.body).toEqual({ id, status: "stopped" });
      const run = await getRun(stack, id);
      expect(run).toMatchObject({ status: "stopped", reason: "stopped", iteration: 0 });
      expect(run.finishedAt).not.toBeNull();
      const events = await getEvents(stack, id);
      expectWellFormedEvents(events);
      expect(events.at(-1)?.data).toMatchObject({ status: "stopped", reason: "stopped" });
      expect(events.map((e) => e.type)).toEqual(["run_queued", "stop_requested", "run_finished"]);

      // A worker coming up later does not run it.
      stack.startWorker();
      const probe = await submit(stack, commandRun("true", { testCommand: "true" }));
      await waitForStatus(stack, probe.id);
      expect(await getRun(stack, id)).toMatchObject({ status: "stopped", iteration: 0 });
      expect(await getIterations(stack, id)).toEqual([]);
      expect(existsSync(join(run.workspace, "ran"))).toBe(false);
    } finally {
      if (!stack.workers.some((w) => !w.hasExited())) stack.startWorker();
    }
  });

  it("stops a run during a long cooldown within seconds", async () => {
    const { id } = await submit(
      stack,
      commandRun("true", { testCommand: "echo nope; exit 1", cooldownMs: 600_000 }),
    );
    const cooldown = await waitForEvent(stack, id, "cooldown_started");
    expect(cooldown.data).toMatchObject({ iteration: 1, cooldownMs: 600_000 });

    const res = await stack.api("POST", `/api/runs/${id}/stop`);
    expect(res.status).toBe(202);
    expect(["stopping", "stopped"]).toContain(res.body.status);
    const run = await waitForStatus(stack, id, ["stopped"], { timeoutMs: 15_000 });
    expect(run).toMatchObject({ reason: "stopped", iteration: 1 });
    expect((await getIterations(stack, id)).map((it) => it.outcome)).toEqual(["validation_failed"]);
    const events = await getEvents(stack, id);
    expectWellFormedEvents(events);
    const types = events.map((e) => e.type);
    expect(types.slice(-3)).toEqual(["cooldown_started", "stop_requested", "run_finished"]);
  });

  it("answers 404 for an unknown run", async () => {
    const res = await stack.api("POST", "/api/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/stop");
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe("not_found");
  });
});
