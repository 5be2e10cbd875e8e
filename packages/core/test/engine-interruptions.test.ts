import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ABANDONED_AGENT_OUTPUT, failRun, runStep } from "@looprun/core";
import { describe, expect, it } from "vitest";
import {
  agentPidsWritten,
  BLOCKING_AGENT,
  engine,
  expectEventInvariants,
  seed,
  types,
  useEngineFixture,
} from "./engine-support";
import { isAlive, readPids, resources, waitFor } from "./support";

useEngineFixture();

const budget = { elapsedMs: 0, remainingIterations: 6 };

describe("runStep: stops, hand-backs, crashes and lost leases", () => {
  it("stops on the stop signal, killing the agent's processes", async () => {
    const run = seed({ agent: { type: "command", command: BLOCKING_AGENT }, testCommand: "true" });
    const stop = new AbortController();
    const pending = runStep(resources(engine.store), run.id, { stop: stop.signal });
    await waitFor(agentPidsWritten, "the agent to start");
    stop.abort();
    const result = await pending;
    expect(result).toEqual({ kind: "finished", status: "stopped", reason: "stopped" });
    for (const pid of readPids(join(engine.ws, "agent.pids"))) expect(isAlive(pid)).toBe(false);
    const final = (await engine.store.getRun(run.id))!;
    expect(final).toMatchObject({ status: "stopped", reason: "stopped" });
    expect(final.finishedAt).not.toBeNull();
    const [it1] = engine.store.iterationsOf(run.id);
    expect(it1).toMatchObject({ status: "failed", outcome: "stopped" });
    expect(it1?.finishedAt).not.toBeNull();
    const events = engine.store.eventsOf(run.id);
    expect(events.at(-1)).toMatchObject({ type: "run_finished", data: { status: "stopped" } });
    // The killed agent ended too: no agent_started without its agent_finished.
    expect(types(events).slice(-2)).toEqual(["agent_finished", "run_finished"]);
    expect(events.at(-2)?.data).toMatchObject({ iteration: 1, exitCode: null });
    expectEventInvariants(events);
  });

  it("stops when the engine.store shows the run stopping", async () => {
    const run = seed({ agent: { type: "command", command: BLOCKING_AGENT }, testCommand: "true" });
    const pending = runStep(resources(engine.store), run.id);
    await waitFor(agentPidsWritten, "the agent to start");
    // What the API does: mark the run stopping (the worker never writes that status).
    engine.store.runs.get(run.id)!.status = "stopping";
    expect(await pending).toEqual({ kind: "finished", status: "stopped", reason: "stopped" });
    for (const pid of readPids(join(engine.ws, "agent.pids"))) expect(isAlive(pid)).toBe(false);
  });

  it("ends the run stopped when the stop came in just before its last gate passed", async () => {
    // The test command marks the moment and lingers: the stop lands while it runs, unseen by
    // the stop poll (which never comes) and by the writes of the iteration (none comes then).
    const marker = join(engine.ws, "..", `validating-${Date.now()}`);
    const run = seed({
      agent: { type: "command", command: "echo hi > out.txt" },
      testCommand: `touch '${marker}'; sleep 0.3`,
      cooldownMs: 0,
    });
    const pending = runStep({ ...resources(engine.store), stopPollMs: 3_600_000 }, run.id);
    await waitFor(() => existsSync(marker), "the test command to start");
    engine.store.runs.get(run.id)!.status = "stopping";
    expect(await pending).toEqual({ kind: "finished", status: "stopped", reason: "stopped" });
    const [it1] = engine.store.iterationsOf(run.id);
    expect(it1).toMatchObject({ status: "failed", outcome: "stopped" });
    expect(it1?.validation).toMatchObject([{ exitCode: 0 }]);
    expect(types(engine.store.eventsOf(run.id)).slice(-2)).toEqual([
      "validation_passed",
      "run_finished",
    ]);
    // What the iteration did is kept: its snapshot is the run's latest, with its rows.
    const final = (await engine.store.getRun(run.id))!;
    expect(final.latestSnapshot).not.toBe(final.baselineSnapshot);
    expect(engine.store.snapshotsOf(run.id).map((s) => [s.n, s.snapshotId])).toEqual([
      [1, final.latestSnapshot],
    ]);
  });

  it("keeps the review of an iteration whose run a stop ended just before its decision", async () => {
    const marker = join(engine.ws, "..", `reviewing-${Date.now()}`);
    const approve = `{"blockingIssues": [], "nonBlockingIssues": [], "score": 70, "fixPlan": []}`;
    const run = seed({
      agent: { type: "command", command: "echo hi > out.txt" },
      testCommand: "true",
      review: { type: "command", command: `touch '${marker}'; sleep 0.3; echo '${approve}'` },
      cooldownMs: 0,
    });
    const pending = runStep({ ...resources(engine.store), stopPollMs: 3_600_000 }, run.id);
    await waitFor(() => existsSync(marker), "the reviewer to start");
    engine.store.runs.get(run.id)!.status = "stopping";
    expect(await pending).toEqual({ kind: "finished", status: "stopped", reason: "stopped" });
    const [review] = engine.store.reviewsOf(run.id);
    expect(review).toMatchObject({ iteration: 1, score: 70 });
    expect(engine.store.iterationsOf(run.id)[0]).toMatchObject({
      outcome: "stopped",
      reviewId: review?.id,
    });
    expect((await engine.store.getRun(run.id))?.latestReviewId).toBe(review?.id);
    expect(types(engine.store.eventsOf(run.id)).slice(-2)).toEqual([
      "review_approved",
      "run_finished",
    ]);
  });

  it("keeps a stop request when a later write sets running", async () => {
    const run = seed({ testCommand: "true" });
    engine.store.runs.get(run.id)!.status = "stopping";
    const claimed = (await engine.store.claimRun(run.id))!;
    const after = await engine.store.commit(
      run.id,
      claimed.run.epoch,
      { run: { status: "running" } },
      Date.now(),
    );
    expect(after.status).toBe("stopping");
    // The next step ends it without running anything.
    expect(await runStep(resources(engine.store), run.id)).toEqual({
      kind: "finished",
      status: "stopped",
      reason: "stopped",
    });
    expect(engine.store.iterationsOf(run.id)).toEqual([]);
  });

  it("ends what a handed-back attempt left outside its process group (setsid)", async () => {
    // The attempt runs again elsewhere: a server it started must not run beside the next one,
    // nor outlive the worker.
    const run = seed({
      agent: {
        type: "command",
        command: `setsid sleep 300 > /dev/null 2>&1 & echo $! > escapee.pid; ${BLOCKING_AGENT}`,
      },
      testCommand: "true",
    });
    const shutdown = new AbortController();
    const pending = runStep(resources(engine.store), run.id, { shutdown: shutdown.signal });
    await waitFor(agentPidsWritten, "the agent to start");
    const escapee = Number(readFileSync(join(engine.ws, "escapee.pid"), "utf8"));
    expect(isAlive(escapee)).toBe(true);
    shutdown.abort();
    expect(await pending).toEqual({ kind: "handed_back" });
    await waitFor(() => !isAlive(escapee), "the escaped process to die");
  });

  it("hands the iteration back on shutdown and resumes it as attempt 2", async () => {
    writeFileSync(join(engine.ws, "go-slow"), "");
    const run = seed({
      agent: {
        type: "command",
        command: `if [ -f go-slow ]; then rm go-slow; ${BLOCKING_AGENT}; fi; touch done`,
      },
      testCommand: "test -f done",
      cooldownMs: 0,
    });
    const shutdown = new AbortController();
    const pending = runStep(resources(engine.store), run.id, { shutdown: shutdown.signal });
    await waitFor(agentPidsWritten, "the agent to start");
    shutdown.abort();
    expect(await pending).toEqual({ kind: "handed_back" });
    for (const pid of readPids(join(engine.ws, "agent.pids"))) expect(isAlive(pid)).toBe(false);

    const handedBack = (await engine.store.getRun(run.id))!;
    expect(handedBack.status).toBe("running");
    expect(handedBack.metrics.iterations).toBe(0);
    expect(engine.store.iterationsOf(run.id).map((i) => [i.n, i.attempt, i.status])).toEqual([
      [1, 1, "abandoned"],
    ]);
    // The killed agent's end is told, and its record kept on the abandoned attempt.
    expect(engine.store.iterationsOf(run.id)[0]?.agent).toMatchObject({ exitCode: null });
    expect(types(engine.store.eventsOf(run.id)).at(-1)).toBe("agent_finished");
    const eventsBefore = engine.store.eventsOf(run.id).length;

    const resumed = await runStep(resources(engine.store), run.id);
    expect(resumed).toEqual({ kind: "finished", status: "succeeded", reason: "success" });
    const its = engine.store.iterationsOf(run.id);
    expect(its.map((i) => [i.n, i.attempt, i.status, i.outcome])).toEqual([
      [1, 1, "abandoned", "stopped"],
      [1, 2, "passed", "complete"],
    ]);
    const final = (await engine.store.getRun(run.id))!;
    expect(final.metrics.iterations).toBe(1);
    expect(final.summary).toBe("succeeded after 1 iteration");
    const events = engine.store.eventsOf(run.id);
    expect(types(events.slice(eventsBefore))).toEqual([
      "run_resumed",
      "iteration_started",
      "agent_started",
      "agent_finished",
      "validation_passed",
      "run_finished",
    ]);
    expect(events[eventsBefore]?.data).toMatchObject({ iteration: 1, abandonedAttempt: 1 });
    expect(
      events.find((e) => e.type === "iteration_started" && e.data.attempt === 2)?.data,
    ).toMatchObject({
      iteration: 1,
    });
    expect(types(events).filter((t) => t === "run_started")).toHaveLength(1);
    expectEventInvariants(events);
  });

  /**
   * The abandoned attempt carries an agent result, as every ended iteration does: killed, with
   * no output kept, lasting what its `agent_finished` says.
   */
  function expectAbandonedAgent(runId: string, agentFinished: unknown): void {
    const attempt = engine.store.iterationsOf(runId)[0];
    expect(attempt?.status).toBe("abandoned");
    expect(attempt?.agent).toEqual({
      exitCode: null,
      output: ABANDONED_AGENT_OUTPUT,
      durationMs: (agentFinished as { durationMs: number }).durationMs,
    });
  }

  /** A worker claimed the run and started iteration 1, then died. */
  async function crashInIteration1(runId: string): Promise<void> {
    const claimed = (await engine.store.claimRun(runId))!;
    await engine.store.commit(
      runId,
      claimed.run.epoch,
      {
        run: {
          status: "running",
          startedAt: Date.now(),
          deadlineAt: Date.now() + 60_000,
          iteration: 1,
        },
        insertIteration: {
          runId,
          n: 1,
          attempt: 1,
          status: "running",
          outcome: null,
          prompt: "p",
          agent: null,
          validation: [],
          reviewId: null,
          feedback: null,
          startedAt: Date.now(),
          finishedAt: null,
        },
        // Written with the iteration, as the engine writes them.
        events: [
          { type: "iteration_started", data: { iteration: 1, attempt: 1, budget } },
          { type: "agent_started", data: { iteration: 1, type: "command", budget } },
        ],
      },
      Date.now(),
    );
  }

  it("resumes an iteration a crashed worker left running", async () => {
    const run = seed({ testCommand: "true", cooldownMs: 0 });
    await crashInIteration1(run.id);
    expect(await runStep(resources(engine.store), run.id)).toMatchObject({ status: "succeeded" });
    // The crashed attempt's outcome is one of the outcomes an iteration has: an error.
    expect(
      engine.store.iterationsOf(run.id).map((i) => [i.n, i.attempt, i.status, i.outcome]),
    ).toEqual([
      [1, 1, "abandoned", "error"],
      [1, 2, "passed", "complete"],
    ]);
    // Its agent's end is told (killed, with no result: its worker died), then the resume.
    const events = engine.store.eventsOf(run.id);
    expect(types(events).slice(0, 5)).toEqual([
      "iteration_started",
      "agent_started",
      "agent_finished",
      "run_resumed",
      "iteration_started",
    ]);
    expect(events[2]?.data).toMatchObject({ iteration: 1, exitCode: null, abandoned: true });
    expectAbandonedAgent(run.id, events[2]?.data);
    expectEventInvariants(events);
  });

  it("fails from outside a run whose job was given up, marking the attempt in flight abandoned", async () => {
    const run = seed({ testCommand: "true" });
    await crashInIteration1(run.id);
    // BullMQ gave its job up (its workers kept dying): the worker fails the run.
    await failRun(resources(engine.store), run.id, "job stalled more than allowable limit");
    expect(await engine.store.getRun(run.id)).toMatchObject({
      status: "failed",
      reason: "error",
      summary: "error: job stalled more than allowable limit",
    });
    // The attempt's worker died in it, as DESIGN says of such an attempt: abandoned.
    expect(
      engine.store.iterationsOf(run.id).map((i) => [i.n, i.attempt, i.status, i.outcome]),
    ).toEqual([[1, 1, "abandoned", "error"]]);
    const events = engine.store.eventsOf(run.id);
    expect(types(events).slice(-2)).toEqual(["agent_finished", "run_finished"]);
    expect(events.at(-2)?.data).toMatchObject({ iteration: 1, exitCode: null, abandoned: true });
    expectAbandonedAgent(run.id, events.at(-2)?.data);
    expectEventInvariants(events);
  });

  it("stops a run whose worker crashed mid-iteration, marking that attempt abandoned", async () => {
    const run = seed({ testCommand: "true" });
    await crashInIteration1(run.id);
    engine.store.runs.get(run.id)!.status = "stopping";
    expect(await runStep(resources(engine.store), run.id)).toEqual({
      kind: "finished",
      status: "stopped",
      reason: "stopped",
    });
    expect(
      engine.store.iterationsOf(run.id).map((i) => [i.n, i.attempt, i.status, i.outcome]),
    ).toEqual([[1, 1, "abandoned", "stopped"]]);
    expect(engine.store.iterationsOf(run.id)[0]?.finishedAt).not.toBeNull();
    expectAbandonedAgent(
      run.id,
      engine.store.eventsOf(run.id).find((e) => e.type === "agent_finished")?.data,
    );
    expect(types(engine.store.eventsOf(run.id))).toEqual([
      "iteration_started",
      "agent_started",
      "agent_finished",
      "run_finished",
    ]);
    expectEventInvariants(engine.store.eventsOf(run.id));
  });

  it("gives up the run when another worker claims it, and writes nothing more", async () => {
    const run = seed({ agent: { type: "command", command: BLOCKING_AGENT }, testCommand: "true" });
    const pending = runStep(resources(engine.store), run.id);
    await waitFor(agentPidsWritten, "the agent to start");
    const before = engine.store.eventsOf(run.id).length;
    const taken = (await engine.store.claimRun(run.id))!;
    expect(await pending).toEqual({ kind: "lease_lost" });
    for (const pid of readPids(join(engine.ws, "agent.pids"))) expect(isAlive(pid)).toBe(false);
    expect(engine.store.eventsOf(run.id)).toHaveLength(before);
    const current = (await engine.store.getRun(run.id))!;
    expect(current.epoch).toBe(taken.run.epoch);
    expect(current.status).toBe("running");
  });

  it("gives up the run when the lease is lost between validation commands", async () => {
    const run = seed({
      agent: { type: "command", command: "true" },
      validationCommands: [
        "touch v1-started; while [ ! -f release ]; do sleep 0.02; done",
        "touch v2-ran",
      ],
    });
    // No poll during the test: the lost lease is seen by the next write.
    const pending = runStep(resources(engine.store, { stopPollMs: 600_000 }), run.id);
    await waitFor(() => existsSync(join(engine.ws, "v1-started")), "the first validation command");
    await engine.store.claimRun(run.id);
    const before = engine.store.eventsOf(run.id).length;
    writeFileSync(join(engine.ws, "release"), "");
    expect(await pending).toEqual({ kind: "lease_lost" });
    expect(existsSync(join(engine.ws, "v2-ran"))).toBe(false);
    expect(engine.store.eventsOf(run.id)).toHaveLength(before);
  });

  it("starts no iteration once the worker has lost its job's lock", async () => {
    const run = seed({
      agent: { type: "command", command: "touch agent-ran" },
      testCommand: "true",
    });
    const leaseLost = new AbortController();
    leaseLost.abort();
    const result = await runStep(resources(engine.store), run.id, { leaseLost: leaseLost.signal });
    expect(result).toEqual({ kind: "lease_lost" });
    expect(engine.store.iterationsOf(run.id)).toEqual([]);
    expect(existsSync(join(engine.ws, "agent-ran"))).toBe(false);
  });

  it("reports a missing run", async () => {
    expect(await runStep(resources(engine.store), "no-such-run")).toEqual({ kind: "missing" });
  });
});
