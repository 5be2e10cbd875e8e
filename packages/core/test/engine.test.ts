import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type EventType, runStep } from "@looprun/core";
import { describe, expect, it } from "vitest";
import {
  BLOCKING_AGENT,
  CHECK,
  engine,
  expectEventInvariants,
  FIXER,
  seed,
  types,
  useEngineFixture,
} from "./engine-support";
import { isAlive, readPids, resources, waitFor } from "./support";

useEngineFixture();

/** Each iteration leaves a process in a session of its own (setsid), pid in escaped.pids. */
const ESCAPING_AGENT = [
  `setsid sh -c 'echo $$ >> escaped.pids; exec sleep 300' >/dev/null 2>&1 &`,
  `until [ "$(wc -l < escaped.pids 2>/dev/null)" -ge "$LOOPRUN_ITERATION" ]; do sleep 0.01; done`,
].join("\n");

describe("runStep", () => {
  it("converges in three iterations, feeding each failure into the next prompt", async () => {
    const run = seed({
      agent: { type: "command", command: FIXER },
      testCommand: CHECK,
      requirements: "Create the files.",
      filePaths: ["a", "b", "c"],
      maxIterations: 5,
      cooldownMs: 10,
    });
    const res = resources(engine.store, {
      commandEnv: { ...process.env, API_TOKEN: "secret-token", MISTRAL_API_KEY: "secret-key" },
    });

    const first = await runStep(res, run.id);
    expect(first.kind).toBe("cooldown");
    const second = await runStep(res, run.id);
    expect(second.kind).toBe("cooldown");
    const third = await runStep(res, run.id);
    expect(third).toEqual({ kind: "finished", status: "succeeded", reason: "success" });

    const final = (await engine.store.getRun(run.id))!;
    expect(final).toMatchObject({
      status: "succeeded",
      reason: "success",
      summary: "succeeded after 3 iterations",
      iteration: 3,
      consecutiveFailures: 0,
    });
    expect(final.metrics).toMatchObject({ iterations: 3, validationFailures: 2 });
    expect(final.finishedAt).not.toBeNull();
    expect(final.deadlineAt).toBe(final.startedAt! + 45 * 60_000);

    const its = engine.store.iterationsOf(run.id);
    expect(its.map((i) => [i.n, i.attempt, i.status, i.outcome])).toEqual([
      [1, 1, "failed", "validation_failed"],
      [2, 1, "failed", "validation_failed"],
      [3, 1, "passed", "complete"],
    ]);
    const [it1, it2, it3] = its;
    expect(it1?.agent).toMatchObject({ exitCode: 0, output: "fixed a\n" });
    expect(it1?.validation).toEqual([
      expect.objectContaining({
        command: CHECK,
        exitCode: 1,
        output: "CHECK-FAILED missing: b c\n",
      }),
    ]);
    expect(it1?.feedback).toContain("CHECK-FAILED missing: b c");
    expect(it3?.validation[0]).toMatchObject({ exitCode: 0, output: "all-good\n" });
    expect(it3?.feedback).toBeNull();
    for (const it of its) expect(it.finishedAt).toBeGreaterThanOrEqual(it.startedAt);

    // The prompt: task, requirements, focus files, gates, iteration and the previous feedback.
    expect(it1?.prompt).toContain("make the checks pass");
    expect(it1?.prompt).toContain("Create the files.");
    expect(it1?.prompt).toContain("- a\n- b\n- c");
    expect(it1?.prompt).toContain("iteration 1 of at most 5");
    expect(it1?.prompt).not.toContain("Feedback from the previous iteration");
    expect(it2?.prompt).toContain("iteration 2 of at most 5");
    expect(it2?.prompt).toContain("CHECK-FAILED missing: b c");
    expect(it3?.prompt).toContain("CHECK-FAILED missing: c");
    expect(it3?.prompt).not.toContain("missing: b c");
    // The agent received exactly the recorded prompt on stdin.
    expect(readFileSync(join(engine.ws, "stdin-2.txt"), "utf8")).toBe(it2?.prompt);

    // Its environment: LOOPRUN_* set, secrets withheld.
    const env = readFileSync(join(engine.ws, "env-1.txt"), "utf8");
    expect(env).toContain(`LOOPRUN_RUN_ID=${run.id}`);
    expect(env).toContain(`LOOPRUN_SESSION_ID=${run.sessionId}`);
    expect(env).toContain("LOOPRUN_ITERATION=1");
    expect(env).toContain("LOOPRUN_PROMPT_FILE=");
    expect(env).not.toContain("secret-token");
    expect(env).not.toContain("secret-key");

    const events = engine.store.eventsOf(run.id);
    const perIteration = (last: EventType): EventType[] => [
      "iteration_started",
      "agent_started",
      "agent_finished",
      last,
    ];
    expect(types(events)).toEqual([
      "run_started",
      ...perIteration("validation_failed"),
      "cooldown_started",
      ...perIteration("validation_failed"),
      "cooldown_started",
      ...perIteration("validation_passed"),
      "run_finished",
    ]);
    expectEventInvariants(events);
    expect(
      events
        .filter((e) => e.type === "cooldown_started")
        .map((e) => e.data.budget.remainingIterations),
    ).toEqual([4, 3]);
    expect(events.at(-1)?.data).toMatchObject({
      status: "succeeded",
      reason: "success",
      budget: { remainingIterations: 2, reason: "success" },
    });
  });

  it("runs every iteration in one step when cooldownMs is 0", async () => {
    const run = seed({
      agent: { type: "command", command: FIXER },
      testCommand: CHECK,
      cooldownMs: 0,
    });
    const result = await runStep(resources(engine.store), run.id);
    expect(result).toEqual({ kind: "finished", status: "succeeded", reason: "success" });
    expect(engine.store.iterationsOf(run.id)).toHaveLength(3);
    expect(types(engine.store.eventsOf(run.id))).not.toContain("cooldown_started");
    expectEventInvariants(engine.store.eventsOf(run.id));
  });

  it.each([
    ["succeeds", "true", "succeeded"],
    ["ends by its budget", "false", "failed"],
  ])(
    "kills what the agent left outside its process group (setsid) once the run %s",
    async (_, test, status) => {
      const run = seed({
        // Each iteration leaves a process in a session of its own, out of reach of its group's kill.
        agent: {
          type: "command",
          command: ESCAPING_AGENT,
        },
        // The one of iteration 1 still runs when iteration 2 starts: it outlives its command.
        validationCommands: [`kill -0 $(head -n1 escaped.pids)`, test],
        maxIterations: 2,
        cooldownMs: 0,
      });
      const result = await runStep(resources(engine.store), run.id);
      expect(result).toMatchObject({ kind: "finished", status });
      const pids = readPids(join(engine.ws, "escaped.pids"));
      expect(pids).toHaveLength(status === "succeeded" ? 1 : 2);
      // It outlived its command: iteration 1's first validation found it alive.
      expect(engine.store.iterationsOf(run.id)[0]?.validation[0]?.exitCode).toBe(0);
      // It did not outlive its run (killed as it ended: dead a moment later).
      for (const pid of pids) await waitFor(() => !isAlive(pid), `${pid} to die`);
    },
  );

  it("keeps what an iteration left outside its group through a cooldown's next step, until the run ends", async () => {
    const run = seed({
      agent: {
        type: "command",
        command: ESCAPING_AGENT,
      },
      // Iteration 2 (the next step, after the cooldown) passes only with iteration 1's alive
      // (running: a killed one may stay a zombie nobody reaps, which `kill -0` finds).
      validationCommands: [
        `s=$(cut -d' ' -f3 /proc/$(head -n1 escaped.pids)/stat) && [ "$s" != Z ]`,
        `test "$LOOPRUN_ITERATION" = 2`,
      ],
      maxIterations: 2,
      cooldownMs: 20,
    });
    expect(await runStep(resources(engine.store), run.id)).toMatchObject({ kind: "cooldown" });
    await new Promise((r) => setTimeout(r, 50));
    // A step after an ordinary one: no crashed worker's leftovers to kill.
    expect(await runStep(resources(engine.store), run.id)).toMatchObject({
      kind: "finished",
      status: "succeeded",
    });
    // Killed as the run ended (SIGKILL is sent, not waited for: it dies a moment later).
    for (const pid of readPids(join(engine.ws, "escaped.pids"))) {
      await waitFor(() => !isAlive(pid), `${pid} to die`);
    }
  });

  it("returns a cooldown until finishedAt + cooldownMs", async () => {
    const run = seed({ testCommand: "false", cooldownMs: 60_000 });
    const result = await runStep(resources(engine.store), run.id);
    expect(result.kind).toBe("cooldown");
    const [it1] = engine.store.iterationsOf(run.id);
    const until = result.kind === "cooldown" ? result.until : 0;
    expect(until).toBe(it1!.finishedAt! + 60_000);
    const cooldown = engine.store.eventsOf(run.id).at(-1);
    expect(cooldown).toMatchObject({
      type: "cooldown_started",
      data: { iteration: 1, cooldownMs: 60_000, until: new Date(until).toISOString() },
    });
    const current = (await engine.store.getRun(run.id))!;
    expect(current.status).toBe("running");
    expect(current.progress).toContain("cooling down");
  });

  it("ends with max_iterations when the iterations run out", async () => {
    const run = seed({
      testCommand: "echo still-failing; exit 1",
      maxIterations: 2,
      cooldownMs: 0,
    });
    const result = await runStep(resources(engine.store), run.id);
    expect(result).toEqual({ kind: "finished", status: "failed", reason: "max_iterations" });
    const final = (await engine.store.getRun(run.id))!;
    expect(final).toMatchObject({
      status: "failed",
      reason: "max_iterations",
      summary: "failed_budget_exhausted",
      iteration: 2,
    });
    expect(final.metrics.iterations).toBe(2);
    const its = engine.store.iterationsOf(run.id);
    expect(its.map((i) => i.n)).toEqual([1, 2]);
    expect(its.every((i) => i.status === "failed" && i.finishedAt !== null)).toBe(true);
    const events = engine.store.eventsOf(run.id);
    expect(types(events).slice(-2)).toEqual(["budget_exhausted", "run_finished"]);
    expect(events.at(-2)?.data).toMatchObject({
      reason: "max_iterations",
      budget: { remainingIterations: 0, reason: "max_iterations" },
    });
    expect(types(events).filter((t) => t === "iteration_started")).toHaveLength(2);
    expectEventInvariants(events);
    // A finished run stays finished.
    expect(await runStep(resources(engine.store), run.id)).toEqual(result);
    expect(engine.store.eventsOf(run.id)).toHaveLength(events.length);
  });

  it("ends with max_iterations on the step after a cooldown, waiting no further cooldown", async () => {
    const run = seed({ testCommand: "false", maxIterations: 2, cooldownMs: 10 });
    const res = resources(engine.store);
    expect((await runStep(res, run.id)).kind).toBe("cooldown");
    expect(await runStep(res, run.id)).toEqual({
      kind: "finished",
      status: "failed",
      reason: "max_iterations",
    });
    expect(engine.store.iterationsOf(run.id).map((i) => i.n)).toEqual([1, 2]);
    expect(
      types(engine.store.eventsOf(run.id)).filter((t) => t === "cooldown_started"),
    ).toHaveLength(1);
    expect(types(engine.store.eventsOf(run.id)).slice(-3)).toEqual([
      "validation_failed",
      "budget_exhausted",
      "run_finished",
    ]);
  });

  it("kills the agent at the deadline and ends with max_minutes", async () => {
    const run = seed({
      agent: { type: "command", command: `${BLOCKING_AGENT}; echo AFTER-SLEEP` },
      testCommand: "true",
      maxMinutes: 0.02,
    });
    const result = await runStep(resources(engine.store), run.id);
    expect(result).toEqual({ kind: "finished", status: "failed", reason: "max_minutes" });
    for (const pid of readPids(join(engine.ws, "agent.pids"))) expect(isAlive(pid)).toBe(false);
    const final = (await engine.store.getRun(run.id))!;
    expect(final).toMatchObject({
      status: "failed",
      reason: "max_minutes",
      summary: "failed_budget_exhausted",
    });
    const [it1, ...rest] = engine.store.iterationsOf(run.id);
    expect(rest).toEqual([]);
    expect(it1).toMatchObject({ status: "failed", outcome: "budget_exhausted" });
    expect(it1?.agent?.exitCode).toBeNull();
    expect(it1?.agent?.output).not.toContain("AFTER-SLEEP");
    // The budget killed it, not a timeout of the agent's own of some odd number of ms.
    expect(it1?.agent?.output).toMatch(
      /\[looprun\] killed: the run's time budget \(maxMinutes\) ran out \(after \d+ ms\)$/,
    );
    const events = engine.store.eventsOf(run.id);
    expect(types(events)).toEqual([
      "run_started",
      "iteration_started",
      "agent_started",
      "agent_finished",
      "budget_exhausted",
      "run_finished",
    ]);
    expect(events[3]?.data).toMatchObject({ iteration: 1, exitCode: null });
    expect(events.at(-1)?.data.budget.reason).toBe("max_minutes");
    expectEventInvariants(events);
  });

  it("kills a validation command at the deadline", async () => {
    const run = seed({
      agent: { type: "command", command: "true" },
      testCommand: "echo $$ > v.pids; sleep 30 & echo $! >> v.pids; wait",
      // 3 s: the agent (`true`) is done well before, even on a busy machine.
      maxMinutes: 0.05,
    });
    const result = await runStep(resources(engine.store), run.id);
    expect(result).toEqual({ kind: "finished", status: "failed", reason: "max_minutes" });
    for (const pid of readPids(join(engine.ws, "v.pids"))) expect(isAlive(pid)).toBe(false);
    const [it1] = engine.store.iterationsOf(run.id);
    expect(it1).toMatchObject({ status: "failed", outcome: "budget_exhausted" });
    expect(types(engine.store.eventsOf(run.id)).slice(-3)).toEqual([
      "validation_failed",
      "budget_exhausted",
      "run_finished",
    ]);
    // Killed, not failed: the change was not judged.
    expect(it1?.validation[0]?.exitCode).toBeNull();
    expect(it1?.validation[0]?.output).toContain(
      "killed: the run's time budget (maxMinutes) ran out",
    );
    expect((await engine.store.getRun(run.id))?.metrics.validationFailures).toBe(0);
  });

  it("does not wait a cooldown that outlasts the deadline", async () => {
    const run = seed({ testCommand: "false", maxMinutes: 0.02, cooldownMs: 600_000 });
    const result = await runStep(resources(engine.store), run.id);
    expect(result).toEqual({ kind: "finished", status: "failed", reason: "max_minutes" });
    expect(engine.store.iterationsOf(run.id)).toHaveLength(1);
    expect(types(engine.store.eventsOf(run.id))).not.toContain("cooldown_started");
  });

  it("ends with max_minutes when the deadline passed during a cooldown, creating no iteration", async () => {
    const run = seed({ testCommand: "false", maxMinutes: 1, cooldownMs: 10 });
    // The engine's clock: moved past the deadline while the run cools down.
    let skew = 0;
    const res = resources(engine.store, { now: () => Date.now() + skew });
    expect((await runStep(res, run.id)).kind).toBe("cooldown");
    const { deadlineAt } = (await engine.store.getRun(run.id))!;
    skew = deadlineAt! - Date.now();
    const before = engine.store.eventsOf(run.id).length;
    expect(await runStep(res, run.id)).toEqual({
      kind: "finished",
      status: "failed",
      reason: "max_minutes",
    });
    expect(engine.store.iterationsOf(run.id)).toHaveLength(1);
    expect(types(engine.store.eventsOf(run.id).slice(before))).toEqual([
      "budget_exhausted",
      "run_finished",
    ]);
  });

  it("ends with consecutive_failures after three failed agent phases", async () => {
    const run = seed({
      agent: { type: "command", command: "echo broken agent; exit 1" },
      testCommand: "false",
      maxIterations: 6,
      cooldownMs: 0,
    });
    const result = await runStep(resources(engine.store), run.id);
    expect(result).toEqual({ kind: "finished", status: "failed", reason: "consecutive_failures" });
    const its = engine.store.iterationsOf(run.id);
    expect(its.map((i) => i.outcome)).toEqual(["agent_failed", "agent_failed", "agent_failed"]);
    expect(its[0]?.agent?.exitCode).toBe(1);
    expect(its[0]?.feedback).toContain("The agent exited with code 1");
    expect(its[1]?.prompt).toContain("broken agent");
    const final = (await engine.store.getRun(run.id))!;
    expect(final).toMatchObject({ consecutiveFailures: 3, reason: "consecutive_failures" });
    expectEventInvariants(engine.store.eventsOf(run.id));
  });

  it("resets the failure count when the agent succeeds", async () => {
    // Fails at iterations 1, 2, 4, 5: never three in a row.
    const run = seed({
      agent: {
        type: "command",
        command: 'case "$LOOPRUN_ITERATION" in 3) exit 0 ;; *) exit 1 ;; esac',
      },
      testCommand: "false",
      maxIterations: 5,
      cooldownMs: 0,
    });
    const result = await runStep(resources(engine.store), run.id);
    expect(result).toEqual({ kind: "finished", status: "failed", reason: "max_iterations" });
    expect(engine.store.iterationsOf(run.id).map((i) => i.outcome)).toEqual([
      "agent_failed",
      "agent_failed",
      "validation_failed",
      "agent_failed",
      "agent_failed",
    ]);
  });

  it("succeeds on the gates even when the agent exits non-zero", async () => {
    const run = seed({ agent: { type: "command", command: "exit 2" }, testCommand: "true" });
    expect(await runStep(resources(engine.store), run.id)).toEqual({
      kind: "finished",
      status: "succeeded",
      reason: "success",
    });
  });
});
