import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
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
  shq,
  submit,
  useStack,
  waitFor,
  waitForEvent,
  waitForStatus,
} from "./support/stack";

const stack = useStack(() => ({ redisUrl: inject("redisUrl") }));

describe("a run that converges", () => {
  it("fixes one bug per iteration and succeeds in 3 iterations, feeding failures back", async () => {
    // The agent: a script outside the workspace that records what it received and fixes one
    // of three bugs per run. The test fails, naming the first missing fix, until all exist.
    const scripts = join(stack.dir, "converge-scripts");
    mkdirSync(scripts);
    const agentScript = join(scripts, "agent.sh");
    writeFileSync(
      agentScript,
      [
        "#!/bin/sh",
        'log="$1"',
        'n="$LOOPRUN_ITERATION"',
        'cp "$LOOPRUN_PROMPT_FILE" "$log/prompt-file.$n"',
        'cat > "$log/stdin.$n"',
        '{ echo "=== iteration $n"; cat "$LOOPRUN_PROMPT_FILE"; } >> "$log/prompts.log"',
        "for f in fix1 fix2 fix3; do",
        '  if [ ! -f "$f" ]; then echo fixed > "$f"; echo "agent: created $f"; exit 0; fi',
        "done",
        'echo "agent: nothing left to fix"',
        "",
      ].join("\n"),
    );
    const workspace = join(stack.workspacesRoot, "converge");
    mkdirSync(workspace);
    writeFileSync(
      join(workspace, "check.sh"),
      [
        "for f in fix1 fix2 fix3; do",
        '  if [ ! -f "$f" ]; then echo "MISSING $f"; exit 1; fi',
        "done",
        'echo "all fixed"',
        "",
      ].join("\n"),
    );

    const { id } = await submit(
      stack,
      commandRun(`sh ${shq(agentScript)} ${shq(scripts)}`, {
        task: "Make check.sh pass",
        workspace: "converge",
        testCommand: "sh check.sh",
      }),
    );
    const run = await waitForStatus(stack, id);

    expect(run).toMatchObject({
      status: "succeeded",
      reason: "success",
      iteration: 3,
      workspace: realpathSync(workspace),
      metrics: { iterations: 3, validationFailures: 2 },
    });
    for (const fix of ["fix1", "fix2", "fix3"]) expect(existsSync(join(workspace, fix))).toBe(true);

    const iterations = await getIterations(stack, id);
    expect(iterations.map((it) => [it.n, it.attempt, it.status, it.outcome])).toEqual([
      [1, 1, "failed", "validation_failed"],
      [2, 1, "failed", "validation_failed"],
      [3, 1, "passed", "complete"],
    ]);
    const [first, second, third] = iterations as [
      (typeof iterations)[0],
      (typeof iterations)[0],
      (typeof iterations)[0],
    ];
    // Agent and validation outputs are stored.
    expect(first.agent).toMatchObject({
      exitCode: 0,
      output: expect.stringContaining("agent: created fix1"),
    });
    expect(third.agent?.output).toContain("agent: created fix3");
    expect(first.validation).toEqual([
      expect.objectContaining({
        command: "sh check.sh",
        exitCode: 1,
        output: expect.stringContaining("MISSING fix2"),
      }),
    ]);
    expect(second.validation[0]).toMatchObject({
      exitCode: 1,
      output: expect.stringContaining("MISSING fix3"),
    });
    expect(third.validation[0]).toMatchObject({
      exitCode: 0,
      output: expect.stringContaining("all fixed"),
    });
    expect(first.feedback).toContain("MISSING fix2");
    for (const it of iterations) {
      expect(Date.parse(it.finishedAt ?? "")).toBeGreaterThanOrEqual(Date.parse(it.startedAt));
    }

    // The failing output of iteration 1 reaches iteration 2's prompt: stored, and received
    // by the agent both on stdin and in $LOOPRUN_PROMPT_FILE.
    expect(first.prompt).toContain("Make check.sh pass");
    expect(first.prompt).not.toContain("MISSING");
    expect(second.prompt).toContain("MISSING fix2");
    expect(third.prompt).toContain("MISSING fix3");
    for (const [n, it] of iterations.entries()) {
      expect(readFileSync(join(scripts, `stdin.${n + 1}`), "utf8")).toBe(it.prompt);
      expect(readFileSync(join(scripts, `prompt-file.${n + 1}`), "utf8")).toBe(it.prompt);
    }
    expect(readFileSync(join(scripts, "prompts.log"), "utf8")).toContain("MISSING fix2");

    const events = await getEvents(stack, id);
    expectWellFormedEvents(events);
    const perIteration = (result: string) => [
      "iteration_started",
      "agent_started",
      "agent_finished",
      result,
    ];
    expect(events.map((e) => e.type)).toEqual([
      "run_queued",
      "run_started",
      ...perIteration("validation_failed"),
      ...perIteration("validation_failed"),
      ...perIteration("validation_passed"),
      "run_finished",
    ]);
    expect(
      events.filter((e) => e.type === "iteration_started").map((e) => e.data.iteration),
    ).toEqual([1, 2, 3]);
    expect(events.at(-1)?.data).toMatchObject({ status: "succeeded", reason: "success" });
    expect(events.at(-1)?.data.budget.remainingIterations).toBe(3);
  });
});

describe("budget exhaustion", () => {
  const alwaysFailing = (budget: Record<string, unknown>) =>
    commandRun("echo trying >> attempts.txt", {
      testCommand: "echo 'still broken'; exit 1",
      ...budget,
    });

  async function expectIterationBudgetExhausted(id: string, iterationsExpected: number) {
    const run = await waitForStatus(stack, id);
    expect(run).toMatchObject({
      status: "failed",
      reason: "max_iterations",
      summary: "failed_budget_exhausted",
      iteration: iterationsExpected,
      budget: { maxIterations: iterationsExpected, remainingIterations: 0 },
    });
    const iterations = await getIterations(stack, id);
    expect(iterations.map((it) => [it.n, it.outcome])).toEqual(
      Array.from({ length: iterationsExpected }, (_, i) => [i + 1, "validation_failed"]),
    );
    expect(
      readFileSync(join(run.workspace, "attempts.txt"), "utf8").trim().split("\n"),
    ).toHaveLength(iterationsExpected);
    const events = await getEvents(stack, id);
    expectWellFormedEvents(events);
    const exhausted = events.filter((e) => e.type === "budget_exhausted");
    expect(exhausted).toHaveLength(1);
    expect(exhausted[0]?.data).toMatchObject({ reason: "max_iterations" });
    expect(events.at(-1)).toMatchObject({
      type: "run_finished",
      data: { status: "failed", reason: "max_iterations", summary: "failed_budget_exhausted" },
    });
  }

  it("ends failed / max_iterations after exactly maxIterations iterations", async () => {
    const { id } = await submit(stack, alwaysFailing({ maxIterations: 2 }));
    await expectIterationBudgetExhausted(id, 2);
  });

  it("accepts the legacy maxAttempts with the same result", async () => {
    const { id } = await submit(stack, alwaysFailing({ maxAttempts: 2 }));
    await expectIterationBudgetExhausted(id, 2);
  });

  it("lets maxIterations win over maxAttempts", async () => {
    const { id } = await submit(stack, alwaysFailing({ maxIterations: 1, maxAttempts: 3 }));
    await expectIterationBudgetExhausted(id, 1);
  });

  it("ends failed / max_minutes when the time budget runs out during the agent, killing it", async () => {
    const { id } = await submit(
      stack,
      commandRun("echo $$ > agent.pid; sleep 30 & echo $! > sleep.pid; wait", {
        testCommand: "true",
        maxMinutes: 0.05,
      }),
    );
    const run = await waitForStatus(stack, id, undefined, { timeoutMs: 25_000 });
    expect(run).toMatchObject({
      status: "failed",
      reason: "max_minutes",
      summary: "failed_budget_exhausted",
    });

    const iterations = await getIterations(stack, id);
    expect(iterations).toHaveLength(1);
    expect(iterations[0]).toMatchObject({ n: 1, status: "failed", outcome: "budget_exhausted" });
    expect(iterations[0]?.agent?.exitCode).not.toBe(0);

    const events = await getEvents(stack, id);
    expectWellFormedEvents(events);
    expect(events.filter((e) => e.type === "budget_exhausted").map((e) => e.data.reason)).toEqual([
      "max_minutes",
    ]);
    expect(events.at(-1)).toMatchObject({ type: "run_finished", data: { reason: "max_minutes" } });

    // Neither the agent's shell nor its sleep survived the deadline.
    const agentPid = readPid(join(run.workspace, "agent.pid"));
    const sleepPid = readPid(join(run.workspace, "sleep.pid"));
    expect(agentPid).toBeDefined();
    expect(sleepPid).toBeDefined();
    await waitFor(() => !isAlive(agentPid!) && !isAlive(sleepPid!), {
      timeoutMs: 5000,
      message: "the agent's processes to be gone",
    });
  });
});

describe("cooldown", () => {
  it("waits cooldownMs between iterations and says so with cooldown_started", async () => {
    const { id } = await submit(
      stack,
      commandRun("echo pass >> passes.txt", {
        testCommand: 'test "$(wc -l < passes.txt)" -ge 2',
        cooldownMs: 1500,
      }),
    );
    const run = await waitForStatus(stack, id);
    expect(run).toMatchObject({ status: "succeeded", reason: "success", iteration: 2 });

    const iterations = await getIterations(stack, id);
    expect(iterations.map((it) => it.outcome)).toEqual(["validation_failed", "complete"]);
    const firstFinished = Date.parse(iterations[0]?.finishedAt ?? "");
    const secondStarted = Date.parse(iterations[1]?.startedAt ?? "");
    expect(secondStarted - firstFinished).toBeGreaterThanOrEqual(1500);

    const events = await getEvents(stack, id);
    expectWellFormedEvents(events);
    const types = events.map((e) => e.type);
    const cooldowns = events.filter((e) => e.type === "cooldown_started");
    expect(cooldowns).toHaveLength(1);
    expect(cooldowns[0]?.data).toMatchObject({ iteration: 1, cooldownMs: 1500 });
    const at = types.indexOf("cooldown_started");
    expect(types.slice(at - 1, at + 2)).toEqual([
      "validation_failed",
      "cooldown_started",
      "iteration_started",
    ]);
  });
});

describe("a workspace swapped for a symlink out of WORKSPACES_ROOT", () => {
  it("is not followed by the worker after a cooldown: the run fails, nothing is made outside", async () => {
    const { id } = await submit(
      stack,
      commandRun("pwd -P >> where.txt", { testCommand: "false", cooldownMs: 2000 }),
    );
    await waitForEvent(stack, id, "cooldown_started");
    const { workspace } = await getRun(stack, id);
    // What a command of the session, or a person, could do meanwhile.
    const outside = join(stack.dir, "outside-swap");
    mkdirSync(outside);
    rmSync(workspace, { recursive: true, force: true });
    symlinkSync(outside, workspace);
    const run = await waitForStatus(stack, id);
    expect(run).toMatchObject({ status: "failed", reason: "error" });
    expect(run.summary).toBe(
      `phase_failed: workspace: the workspace ${workspace} leads to ${outside} now (a symlink was put in its path): the run does not follow it`,
    );
    expect(readdirSync(outside)).toEqual([]);
    expect(await getIterations(stack, id)).toHaveLength(1);
  });
});
