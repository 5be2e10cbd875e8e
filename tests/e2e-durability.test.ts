// Fault injection through real processes (issue #5): each test breaks one thing — a worker
// killed, paused or terminated, Redis wiped — and checks the guarantee that must survive it.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  countEvents,
  ensureWorkers,
  expectIterationsOnce,
  FAST_RECOVERY,
  killGroup,
  pauseOutsideWrites,
  RECOVERY,
  submitUntilAgentRuns,
  WORKER_ENV,
  waitForDeath,
  withWorkersKeptAlive,
  workerWithPid,
} from "./support/cluster";
import {
  commandRun,
  expectWellFormedEvents,
  getEvents,
  getIterations,
  getRun,
  isAlive,
  type RunView,
  readPid,
  type Stack,
  startStack,
  submit,
  waitFor,
  waitForEvent,
  waitForStatus,
} from "./support/stack";

/** What a write changes in a run (not the times computed when it is read). */
const stableFields = (run: RunView) => {
  const { status, reason, summary, iteration, progress, metrics, startedAt, finishedAt } = run;
  return { status, reason, summary, iteration, progress, metrics, startedAt, finishedAt };
};

describe("workers crashing, pausing and shutting down", () => {
  let stack: Stack;

  beforeAll(async () => {
    stack = await startStack({ redisUrl: inject("redisUrl"), workers: 0, env: FAST_RECOVERY });
    ensureWorkers(stack, 2, WORKER_ENV);
  });

  afterAll(async () => {
    // A paused worker would ignore SIGTERM until continued.
    for (const w of stack?.workers ?? []) {
      if (!w.hasExited()) w.child.kill("SIGCONT");
    }
    await stack?.stop();
  });

  it("resumes on another worker the run of a worker killed with SIGKILL mid-iteration", async () => {
    ensureWorkers(stack, 2, WORKER_ENV);
    // Iteration 1 fails its test; the first attempt of iteration 2 records its worker and
    // sleeps (the worker is killed then); iteration 3 passes.
    const agent = [
      'n="$LOOPRUN_ITERATION"',
      'if [ "$n" = 2 ] && [ ! -f crashed-once ]; then touch crashed-once; echo $LOOPRUN_WORKER_PID > worker.pid; echo $$ > agent.pid; exec sleep 300; fi',
      'echo "iteration $n ran on $LOOPRUN_WORKER_PID"',
      'if [ "$n" -ge 3 ]; then touch done; fi',
    ].join("\n");
    const { id, running, agentPid } = await submitUntilAgentRuns(
      stack,
      agent,
      { testCommand: "test -f done" },
      { message: "the agent of iteration 2 writing its pid" },
    );
    try {
      const doomed = workerWithPid(stack, readPid(join(running.workspace, "worker.pid"))!);
      expect((await doomed.stop("SIGKILL")).signal).toBe("SIGKILL");
      // The crashed worker's agent lives on in its own process group until the run resumes.
      expect(isAlive(agentPid)).toBe(true);

      const run = await waitForStatus(stack, id, undefined, RECOVERY);
      expect(run, stack.logs()).toMatchObject({
        status: "succeeded",
        reason: "success",
        iteration: 3,
        metrics: { iterations: 3 },
      });
      const iterations = await getIterations(stack, id);
      expect(expectIterationsOnce(iterations)).toEqual([
        [1, 1, "failed"],
        [2, 1, "abandoned"],
        [2, 2, "failed"],
        [3, 1, "passed"],
      ]);
      expect(iterations[1]?.finishedAt).not.toBeNull();
      // The worker that resumed the run killed the agent the crashed one left behind.
      await waitForDeath(agentPid, "the orphaned agent");

      const events = await getEvents(stack, id);
      expectWellFormedEvents(events);
      expect(events.filter((e) => e.type === "run_resumed").map((e) => e.data)).toEqual([
        expect.objectContaining({ iteration: 2, abandonedAttempt: 1 }),
      ]);
      expect(
        events
          .filter((e) => e.type === "iteration_started")
          .map((e) => [e.data.iteration, e.data.attempt]),
      ).toEqual([
        [1, 1],
        [2, 1],
        [2, 2],
        [3, 1],
      ]);
      expect(countEvents(events, "run_started")).toBe(1);
      expect(countEvents(events, "run_finished")).toBe(1);
    } finally {
      killGroup(agentPid);
    }
  }, 150_000);

  it("kills the agent of a worker that died right after starting it, before recording it", async () => {
    ensureWorkers(stack, 2, WORKER_ENV);
    // The first attempt's agent kills its worker at once (shell builtins only: before the
    // worker has stored the agent's process group), then lives on.
    const agent = [
      "if [ -f started ]; then echo resumed; else",
      "  kill -9 $LOOPRUN_WORKER_PID; echo $$ > agent.pid; : > started; exec sleep 300",
      "fi",
    ].join("\n");
    const { id, agentPid } = await submitUntilAgentRuns(stack, agent);
    try {
      const run = await waitForStatus(stack, id, undefined, RECOVERY);
      expect(run).toMatchObject({ status: "succeeded", reason: "success", iteration: 1 });
      expect(expectIterationsOnce(await getIterations(stack, id))).toEqual([
        [1, 1, "abandoned"],
        [1, 2, "passed"],
      ]);
      // The worker that resumed the run killed the agent the dead one left behind.
      await waitForDeath(agentPid, "the orphaned agent");
    } finally {
      killGroup(agentPid);
    }
  }, 150_000);

  it("fences off a worker paused (SIGSTOP) past its lease: its writes are refused and its agent killed", async () => {
    ensureWorkers(stack, 2, WORKER_ENV);
    // Attempt 1 records its worker and sleeps; attempt 2 records its worker and holds the run
    // until the test releases it.
    const agent = [
      "if [ -f started ]; then",
      "  echo $LOOPRUN_WORKER_PID > worker2.pid",
      "  while [ ! -f release ]; do sleep 0.1; done",
      "  echo resumed",
      "else",
      "  touch started; echo $LOOPRUN_WORKER_PID > worker.pid; echo $$ > agent.pid; exec sleep 300",
      "fi",
    ].join("\n");
    const { id, running, agentPid } = await submitUntilAgentRuns(stack, agent);
    const paused = workerWithPid(stack, readPid(join(running.workspace, "worker.pid"))!);
    try {
      await pauseOutsideWrites(paused, stack.databasePath);
      // Another worker takes the run once the paused one's lease has expired.
      const takerPid = await waitFor(() => readPid(join(running.workspace, "worker2.pid")), {
        ...RECOVERY,
        message: "another worker taking the run over",
      });
      expect(takerPid).not.toBe(paused.pid);
      expect(stack.workers.some((w) => w.pid === takerPid && !w.hasExited())).toBe(true);
      // The taker killed the paused worker's agent (its process group carries the run id).
      await waitForDeath(agentPid, "the paused worker's agent");
      const iterationsBefore = await getIterations(stack, id);
      expect(iterationsBefore.map((it) => [it.n, it.attempt, it.status])).toEqual([
        [1, 1, "abandoned"],
        [1, 2, "running"],
      ]);
      const eventsBefore = await getEvents(stack, id);
      const runBefore = await getRun(stack, id);

      // The paused worker wakes up while the other one holds the run.
      paused.child.kill("SIGCONT");
      await waitFor(
        () =>
          paused
            .output()
            .split("\n")
            .some((line) => line.includes(id) && line.includes('"kind":"lease_lost"')),
        { timeoutMs: 30_000, message: `the resumed worker giving run ${id} up (lease_lost)` },
      );
      // It wrote nothing: no event, no iteration change, the run as the taker left it.
      expect(await getEvents(stack, id)).toEqual(eventsBefore);
      expect(await getIterations(stack, id)).toEqual(iterationsBefore);
      expect(stableFields(await getRun(stack, id))).toEqual(stableFields(runBefore));
      expect(paused.hasExited()).toBe(false);

      writeFileSync(join(running.workspace, "release"), "");
      const run = await waitForStatus(stack, id, undefined, RECOVERY);
      expect(run).toMatchObject({ status: "succeeded", reason: "success", iteration: 1 });
      const iterations = await getIterations(stack, id);
      expect(expectIterationsOnce(iterations)).toEqual([
        [1, 1, "abandoned"],
        [1, 2, "passed"],
      ]);
      expect(iterations[1]?.agent?.output).toContain("resumed");
      const events = await getEvents(stack, id);
      expectWellFormedEvents(events);
      expect(countEvents(events, "run_resumed")).toBe(1);
      expect(countEvents(events, "iteration_started")).toBe(2);
      // The fenced attempt's agent's end is written by the worker that took the run.
      expect(countEvents(events, "agent_finished")).toBe(2);
      const abandonedEnd = events.find((e) => e.type === "agent_finished")?.data;
      expect(abandonedEnd).toMatchObject({ iteration: 1, exitCode: null, abandoned: true });
      // The abandoned attempt says the same of its agent.
      expect(iterations[0]?.agent).toMatchObject({
        exitCode: null,
        durationMs: abandonedEnd?.durationMs,
      });
      expect(countEvents(events, "run_finished")).toBe(1);
      expect(events.at(-1)?.data).toMatchObject({ status: "succeeded", reason: "success" });
    } finally {
      if (!paused.hasExited()) paused.child.kill("SIGCONT");
      killGroup(agentPid);
    }
  }, 150_000);

  it("hands the iteration in flight back on SIGTERM; another worker runs it again as attempt 2", async () => {
    ensureWorkers(stack, 2, WORKER_ENV);
    const agent = [
      "if [ -f started ]; then echo $LOOPRUN_WORKER_PID > worker2.pid; echo resumed; else",
      "  touch started; echo $LOOPRUN_WORKER_PID > worker.pid; echo $$ > agent.pid; exec sleep 300",
      "fi",
    ].join("\n");
    const { id, running, agentPid } = await submitUntilAgentRuns(stack, agent);
    try {
      const first = workerWithPid(stack, readPid(join(running.workspace, "worker.pid"))!);
      const exit = await first.stop("SIGTERM");
      expect(exit, first.output()).toEqual({ code: 0, signal: null });
      // It killed its agent before handing the run back (waiting at most its grace for the
      // group to die).
      await waitForDeath(agentPid, "the handed-back agent");

      const run = await waitForStatus(stack, id, undefined, RECOVERY);
      expect(run).toMatchObject({ status: "succeeded", reason: "success", iteration: 1 });
      const iterations = await getIterations(stack, id);
      expect(expectIterationsOnce(iterations)).toEqual([
        [1, 1, "abandoned"],
        [1, 2, "passed"],
      ]);
      expect(iterations[1]?.agent?.output).toContain("resumed");
      expect(readPid(join(running.workspace, "worker2.pid"))).not.toBe(first.pid);
      const events = await getEvents(stack, id);
      expectWellFormedEvents(events);
      expect(events.filter((e) => e.type === "run_resumed").map((e) => e.data)).toEqual([
        expect.objectContaining({ iteration: 1, abandonedAttempt: 1 }),
      ]);
      expect(countEvents(events, "run_finished")).toBe(1);
    } finally {
      killGroup(agentPid);
    }
  }, 150_000);

  it("exits promptly on SIGTERM during a cooldown (it holds no job); the run goes on elsewhere", async () => {
    ensureWorkers(stack, 2, WORKER_ENV);
    const agent = [
      'echo $LOOPRUN_WORKER_PID > "worker-$LOOPRUN_ITERATION.pid"',
      'if [ "$LOOPRUN_ITERATION" -ge 2 ]; then touch done; fi',
    ].join("\n");
    const { id } = await submit(
      stack,
      commandRun(agent, { testCommand: "test -f done", cooldownMs: 6000 }),
    );
    await waitForEvent(stack, id, "cooldown_started", { timeoutMs: 60_000 });
    const { workspace } = await getRun(stack, id);
    const first = workerWithPid(stack, readPid(join(workspace, "worker-1.pid"))!);

    const signalled = Date.now();
    const exit = await first.stop("SIGTERM");
    const tookMs = Date.now() - signalled;
    expect(exit, first.output()).toEqual({ code: 0, signal: null });
    expect(tookMs, "time from SIGTERM to exit during a cooldown").toBeLessThanOrEqual(10_000);
    // It left within the cooldown: iteration 2 had not started.
    expect((await getIterations(stack, id)).map((it) => [it.n, it.status])).toEqual([
      [1, "failed"],
    ]);

    const run = await waitForStatus(stack, id, undefined, RECOVERY);
    expect(run).toMatchObject({ status: "succeeded", reason: "success", iteration: 2 });
    const iterations = await getIterations(stack, id);
    expect(expectIterationsOnce(iterations)).toEqual([
      [1, 1, "failed"],
      [2, 1, "passed"],
    ]);
    expect(readPid(join(workspace, "worker-2.pid"))).not.toBe(first.pid);
    const events = await getEvents(stack, id);
    expectWellFormedEvents(events);
    expect(countEvents(events, "run_resumed")).toBe(0);
    expect(countEvents(events, "run_finished")).toBe(1);
  }, 150_000);

  it("fails a poison run (its agent kills its worker) after the attempt limit, freeing the session", async () => {
    const sessionId = `poison-${Date.now()}`;
    // Every attempt kills the worker that runs it (the agent's parent is that worker); the
    // test restarts workers as they die.
    const { id } = await submit(
      stack,
      commandRun('echo "$LOOPRUN_WORKER_PID" >> killed-workers; kill -9 $LOOPRUN_WORKER_PID', {
        sessionId,
        testCommand: "true",
      }),
    );
    const run = await withWorkersKeptAlive(stack, 2, WORKER_ENV, () =>
      waitForStatus(stack, id, undefined, { timeoutMs: 180_000 }),
    );
    expect(run).toMatchObject({ status: "failed", reason: "error" });
    // Either limit may end it: the engine's (an iteration interrupted 3 times) or BullMQ's
    // (a job stalled more than maxStalledCount times); both allow exactly 3 attempts.
    expect(run.summary).toMatch(/interrupted 3 times|stalled more than allowable limit/);
    const iterations = await getIterations(stack, id);
    const rows = expectIterationsOnce(iterations);
    expect(rows.map(([n, attempt]) => [n, attempt])).toEqual([
      [1, 1],
      [1, 2],
      [1, 3],
    ]);
    expect(rows.every(([, , status]) => status === "abandoned" || status === "failed")).toBe(true);
    const killed = readFileSync(join(run.workspace, "killed-workers"), "utf8").trim().split("\n");
    expect(new Set(killed).size, `workers killed: ${killed.join(", ")}`).toBe(3);
    const events = await getEvents(stack, id);
    expectWellFormedEvents(events);
    expect(countEvents(events, "run_finished")).toBe(1);
    expect(countEvents(events, "run_started")).toBe(1);

    // The session is free again.
    ensureWorkers(stack, 2, WORKER_ENV);
    const next = await submit(stack, commandRun("echo fine", { sessionId, testCommand: "true" }));
    expect(await waitForStatus(stack, next.id, undefined, RECOVERY)).toMatchObject({
      status: "succeeded",
    });
  }, 300_000);

  it("fails a run whose iteration was handed back 3 times (the engine's attempt limit), freeing the session", async () => {
    // Hand-backs (SIGTERM) are not stalls, so BullMQ's stall limit never applies: the
    // engine's own limit of 3 interrupted attempts ends the run.
    ensureWorkers(stack, 2, WORKER_ENV);
    const sessionId = `handed-back-${Date.now()}`;
    const agent =
      'n=$(ls | grep -c "^attempt-"); echo $LOOPRUN_WORKER_PID > "attempt-$((n + 1)).pid"; exec sleep 300';
    const { id } = await submit(stack, commandRun(agent, { sessionId, testCommand: "true" }));
    const { workspace } = await waitForStatus(stack, id, ["running"]);
    for (const attempt of [1, 2, 3]) {
      const pid = await waitFor(() => readPid(join(workspace, `attempt-${attempt}.pid`)), {
        ...RECOVERY,
        message: `attempt ${attempt} starting`,
      });
      const worker = workerWithPid(stack, pid);
      expect(await worker.stop("SIGTERM"), worker.output()).toEqual({ code: 0, signal: null });
      ensureWorkers(stack, 2, WORKER_ENV);
    }
    const run = await waitForStatus(stack, id, undefined, RECOVERY);
    expect(run).toMatchObject({ status: "failed", reason: "error" });
    expect(run.summary).toContain("interrupted 3 times");
    const iterations = await getIterations(stack, id);
    expect(expectIterationsOnce(iterations)).toEqual([
      [1, 1, "abandoned"],
      [1, 2, "abandoned"],
      [1, 3, "abandoned"],
    ]);
    const events = await getEvents(stack, id);
    expectWellFormedEvents(events);
    expect(countEvents(events, "iteration_started")).toBe(3);
    expect(countEvents(events, "run_finished")).toBe(1);

    const next = await submit(stack, commandRun("echo fine", { sessionId, testCommand: "true" }));
    expect(await waitForStatus(stack, next.id, undefined, RECOVERY)).toMatchObject({
      status: "succeeded",
    });
  }, 200_000);
});
