import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { RUN_QUEUE } from "@looprun/core";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { FakeMistral, finish, type ReceivedRequest, type Reply } from "./support/fake-mistral";
import {
  cliEnvFor,
  commandRun,
  expectWellFormedEvents,
  getEvents,
  getIterations,
  getRun,
  LOOPRUN_BIN,
  runCli,
  type Stack,
  spawnManaged,
  startStack,
  submit,
  waitFor,
  waitForStatus,
} from "./support/stack";

const fake = new FakeMistral();
let stack: Stack;
let connection: Redis;
let queue: Queue;

beforeAll(async () => {
  await fake.start();
  stack = await startStack({
    redisUrl: inject("redisUrl"),
    env: {
      MISTRAL_API_KEY: "approval-e2e-key-0123456789",
      MISTRAL_SERVER_URL: fake.url,
      // The reconciler looks often: it must leave waiting runs alone (they have no job).
      LOOPRUN_RECONCILE_MS: "200",
    },
  });
  connection = new Redis(inject("redisUrl"), { maxRetriesPerRequest: null });
  queue = new Queue(RUN_QUEUE, { connection, prefix: stack.prefix });
});
afterAll(async () => {
  await queue?.close();
  connection?.disconnect();
  await stack?.stop();
  await fake.stop();
});
beforeEach(() => fake.reset());

const cliEnv = () => cliEnvFor(stack.url);

const userText = (req: ReceivedRequest | undefined) =>
  (req?.messages ?? [])
    .filter((m) => m.role === "user")
    .map((m) => String(m.content))
    .join("\n");

/** The run waits, and no BullMQ job of it is waiting, active or delayed: no worker slot held. */
async function expectNoJobHeld(runId: string) {
  await waitFor(
    async () => {
      const job = await queue.getJob(runId);
      return job === undefined || (await job.getState()) === "completed";
    },
    { message: `the job of run ${runId} to complete` },
  );
  const counts = await queue.getJobCounts("waiting", "active", "delayed", "prioritized");
  expect(counts).toEqual({ waiting: 0, active: 0, delayed: 0, prioritized: 0 });
}

/** A command agent with the planning phase: it prints a plan in the phase, then works. */
const PLANNING_AGENT = [
  'if [ -n "$LOOPRUN_PHASE" ]; then echo "1. touch done"; exit 0; fi',
  "cat > prompt.txt; touch done",
].join("\n");

const planningRun = (rest: Record<string, unknown> = {}) =>
  commandRun(PLANNING_AGENT, {
    testCommand: "test -f done",
    phases: ["planning"],
    approval: "plan",
    ...rest,
  });

describe("plan approval through the API, a worker and the fake Mistral", () => {
  it("the mistral agent's plan waits; approved with an edit (by the CLI), the agent works from the edited plan", async () => {
    const PLAN: Reply = {
      content: JSON.stringify({ steps: [{ title: "Write done.txt" }, { title: "Check it" }] }),
    };
    fake.replies(
      PLAN,
      {
        toolCalls: [
          { name: "workspace__write_file", arguments: { path: "done.txt", content: "ok\n" } },
        ],
      },
      finish("written"),
    );
    const run = await submit(stack, {
      task: "Write done.txt",
      agent: { type: "mistral", model: "mistral-small-latest", plan: true },
      testCommand: "test -f done.txt",
      approval: "plan",
      cooldownMs: 0,
    });
    const waiting = await waitForStatus(stack, run.id, ["awaiting_approval"]);
    expect(waiting).toMatchObject({
      approvalMode: "plan",
      approval: { kind: "plan", iteration: 0, question: null },
      iteration: 0,
    });
    expect((waiting as unknown as { approval: { plan: string } }).approval.plan).toContain(
      "Write done.txt",
    );
    expect(await getIterations(stack, run.id)).toEqual([]);
    await expectNoJobHeld(run.id);
    expect(fake.requests).toHaveLength(1);

    // A plan the API refuses: the CLI names the field inside the file, not the body's `plan`.
    const badFile = join(stack.dir, "bad-plan.json");
    writeFileSync(badFile, JSON.stringify({ steps: [{ detail: "no title" }] }));
    const bad = await runCli(["approve", run.id, "--plan", badFile], cliEnv());
    expect(bad.code, bad.output).toBe(1);
    expect(bad.output).toMatch(
      new RegExp(`^looprun: 400 invalid_request: --plan ${badFile}: steps\\.0\\.title: `, "m"),
    );
    expect(bad.output).not.toContain("plan.steps");
    // A file that is no plan at all: the flag alone, once.
    writeFileSync(badFile, "[]");
    const notAPlan = await runCli(["approve", run.id, "--plan", badFile], cliEnv());
    expect(notAPlan.code, notAPlan.output).toBe(1);
    expect(notAPlan.output).toMatch(
      new RegExp(`^looprun: 400 invalid_request: --plan ${badFile}: [^:]`, "m"),
    );
    expect((await getRun(stack, run.id)).status).toBe("awaiting_approval");

    const planFile = join(stack.dir, "edited-plan.json");
    writeFileSync(
      planFile,
      JSON.stringify({ steps: [{ title: "EDITED STEP: write done.txt", detail: "one write" }] }),
    );
    const cli = await runCli(["approve", run.id, "--plan", planFile], cliEnv());
    expect(cli.code, cli.output).toBe(0);
    expect(cli.stdout).toContain("plan approved (edited)");

    const final = await waitForStatus(stack, run.id);
    expect(final.status).toBe("succeeded");
    expect((final as unknown as { approval: unknown }).approval).toBeNull();
    // The agent did not plan again, and its prompt holds the edited plan.
    expect(fake.requests).toHaveLength(3);
    expect(userText(fake.requests[1])).toContain("EDITED STEP: write done.txt");
    expect(userText(fake.requests[1])).not.toContain("Check it");

    const events = await getEvents(stack, run.id);
    expectWellFormedEvents(events);
    const types = events.map((e) => e.type);
    expect(types.slice(0, 6)).toEqual([
      "run_queued",
      "run_started",
      "plan_created",
      "approval_requested",
      "plan_updated",
      "approval_granted",
    ]);
    expect(types.filter((t) => t === "run_started")).toHaveLength(1);
    expect(events.find((e) => e.type === "plan_updated")?.data).toMatchObject({
      version: 2,
      editedBy: "person",
    });
  });

  it("the budget clock stands still while the run waits longer than its whole time budget", async () => {
    // 0.05 minutes: 3 seconds of budget.
    const run = await submit(stack, planningRun({ maxMinutes: 0.05 }));
    const waiting = await waitForStatus(stack, run.id, ["awaiting_approval"]);
    await expectNoJobHeld(run.id);
    const requestedAt = Date.parse(
      (waiting as unknown as { approval: { requestedAt: string } }).approval.requestedAt,
    );
    // Wait past the whole budget, and past the reconciler's 5 s grace for new runs (a
    // condition on the clock, not an assertion on timing).
    const createdAt = Date.parse(waiting.createdAt);
    await waitFor(() => Date.now() > Math.max(requestedAt + 3_500, createdAt + 6_000), {
      message: "the budget's 3 s and the reconciler's grace to pass",
      intervalMs: 100,
    });
    // The reconciler did not enqueue the waiting run again.
    await expectNoJobHeld(run.id);
    const still = await getRun(stack, run.id);
    expect(still.status).toBe("awaiting_approval");
    // The clock stopped at the pause: elapsed is the time from the start to the request.
    expect(still.budget.elapsedMs).toBe(requestedAt - Date.parse(still.startedAt!));

    const approved = await stack.api("POST", `/api/runs/${run.id}/approve`);
    expect(approved.status).toBe(202);
    expect(approved.body).toEqual({ id: run.id, status: "queued" });

    const final = await waitForStatus(stack, run.id);
    expect(final).toMatchObject({ status: "succeeded", reason: "success" });
    expect(final.metrics.iterations).toBe(1);
    const budget = final.budget as typeof final.budget & { pausedMs: number };
    expect(budget.pausedMs).toBeGreaterThanOrEqual(3_500);
    // Elapsed is the run's wall-clock time less the wait.
    expect(budget.elapsedMs).toBe(
      Date.parse(final.finishedAt!) - Date.parse(final.startedAt!) - budget.pausedMs,
    );
    const finished = (await getEvents(stack, run.id)).find((e) => e.type === "run_finished");
    expect(finished?.data.budget.elapsedMs).toBe(budget.elapsedMs);
    // The planning phase's plan reached the iteration's prompt.
    const [it1] = await getIterations(stack, run.id);
    expect(it1?.prompt).toContain("1. touch done");
  });

  it("reject ends the run stopped with the reason; bad answers get 400/404/409 and change nothing", async () => {
    const run = await submit(stack, planningRun());
    await waitForStatus(stack, run.id, ["awaiting_approval"]);

    const badPlan = await stack.api("POST", `/api/runs/${run.id}/approve`, { plan: { steps: [] } });
    expect(badPlan.status).toBe(400);
    expect(badPlan.body.error.code).toBe("invalid_request");
    expect(badPlan.body.error.issues[0].path).toBe("plan.steps");
    const noReason = await stack.api("POST", `/api/runs/${run.id}/reject`, {});
    expect(noReason.status).toBe(400);
    expect(noReason.body.error.issues[0].path).toBe("reason");
    const notJson = await stack.api("POST", `/api/runs/${run.id}/reply`, "{");
    expect(notJson.status).toBe(400);
    // A plan wait takes no reply.
    const reply = await stack.api("POST", `/api/runs/${run.id}/reply`, { message: "hi" });
    expect(reply.status).toBe(409);
    expect(reply.body.error).toMatchObject({
      code: "not_awaiting_approval",
      status: "awaiting_approval",
      awaiting: "plan",
    });
    expect((await getRun(stack, run.id)).status).toBe("awaiting_approval");
    const missing = await stack.api("POST", "/api/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/approve");
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe("not_found");

    const cli = await runCli(["reject", run.id, "--reason", "too risky today"], cliEnv());
    expect(cli.code, cli.output).toBe(0);
    const final = await getRun(stack, run.id);
    expect(final).toMatchObject({ status: "stopped", reason: "stopped" });
    expect(final.summary).toContain("too risky today");
    const types = (await getEvents(stack, run.id)).map((e) => e.type);
    expect(types.slice(-2)).toEqual(["approval_rejected", "run_finished"]);

    for (const [path, body] of [
      ["approve", undefined],
      ["reject", { reason: "again" }],
      ["reply", { message: "late" }],
    ] as const) {
      const again = await stack.api("POST", `/api/runs/${run.id}/${path}`, body);
      expect(again.status, path).toBe(409);
      expect(again.body.error.code, path).toBe("run_finished");
    }
  });

  it("a run that does not wait answers 409 not_awaiting_approval; a stop ends a waiting run at once", async () => {
    const gate = join(stack.dir, "release-approval");
    const busy = await submit(
      stack,
      commandRun(`while [ ! -f ${gate} ]; do sleep 0.05; done; touch done`, {
        testCommand: "test -f done",
      }),
    );
    await waitForStatus(stack, busy.id, ["running"]);
    const approve = await stack.api("POST", `/api/runs/${busy.id}/approve`);
    expect(approve.status).toBe(409);
    expect(approve.body.error).toMatchObject({ code: "not_awaiting_approval", awaiting: null });
    writeFileSync(gate, "");
    expect((await waitForStatus(stack, busy.id)).status).toBe("succeeded");

    const refused = await stack.api(
      "POST",
      "/api/runs",
      commandRun("true", { testCommand: "true", approval: "plan" }),
    );
    expect(refused.status).toBe(400);
    expect(refused.body.error.issues[0].path).toBe("approval");

    const run = await submit(stack, planningRun());
    await waitForStatus(stack, run.id, ["awaiting_approval"]);
    const stop = await stack.api("POST", `/api/runs/${run.id}/stop`);
    expect(stop.status).toBe(202);
    expect(stop.body).toEqual({ id: run.id, status: "stopped" });
    expect((await getRun(stack, run.id)).status).toBe("stopped");
  });
});

describe("a blocked agent waits for a person's reply", () => {
  /** A mistral agent's run to write hello.txt, checked by `testCommand`. */
  const greetingRun = (testCommand: string, maxIterations: number) => ({
    task: "Write the greeting into hello.txt",
    agent: { type: "mistral", model: "mistral-small-latest" },
    testCommand,
    cooldownMs: 0,
    maxIterations,
  });

  it("waits with the question instead of burning iterations; the reply reaches the next prompt", async () => {
    const QUESTION = "Which greeting should hello.txt hold: hello or hi?";
    fake.replies(
      finish(QUESTION, "blocked"),
      {
        toolCalls: [
          { name: "workspace__write_file", arguments: { path: "hello.txt", content: "hi\n" } },
        ],
      },
      finish("written"),
    );
    const run = await submit(stack, greetingRun("grep -q hi hello.txt", 3));
    const waiting = await waitForStatus(stack, run.id, ["awaiting_approval"]);
    expect(waiting.progress).toContain(QUESTION);
    expect(waiting).toMatchObject({
      approval: { kind: "question", iteration: 1, question: QUESTION, plan: null },
    });
    expect(waiting.metrics.iterations).toBe(1);
    await expectNoJobHeld(run.id);
    // The clock stopped when the agent asked.
    const asking = waiting as unknown as { approval: { requestedAt: string } };
    const askedAt = Date.parse(asking.approval.requestedAt);
    await waitFor(() => Date.now() > askedAt + 1_000, { message: "a second of waiting" });
    const stillWaiting = await getRun(stack, run.id);
    expect(stillWaiting.budget.elapsedMs).toBe(askedAt - Date.parse(stillWaiting.startedAt!));
    const [blocked] = await getIterations(stack, run.id);
    expect(blocked).toMatchObject({ status: "failed", outcome: "validation_failed" });
    const asked = (await getEvents(stack, run.id)).find((e) => e.type === "approval_requested");
    expect(asked?.data).toMatchObject({ kind: "question", question: QUESTION, iteration: 1 });

    const approve = await stack.api("POST", `/api/runs/${run.id}/approve`);
    expect(approve.status).toBe(409);
    expect(approve.body.error).toMatchObject({
      code: "not_awaiting_approval",
      awaiting: "question",
    });
    const empty = await stack.api("POST", `/api/runs/${run.id}/reply`, { message: "  " });
    expect(empty.status).toBe(400);
    expect(empty.body.error.issues[0].path).toBe("message");
    // The CLI names its argument, not the API's field.
    const blank = await runCli(["reply", run.id, "  "], cliEnv());
    expect(blank.code).toBe(1);
    expect(blank.output).toMatch(/400 invalid_request: <message>: must not be empty/);
    expect(fake.requests).toHaveLength(1);

    // `watch` shows the question and how to answer it, then follows the run to its end.
    const watch = spawnManaged("looprun watch", process.execPath, [LOOPRUN_BIN, "watch", run.id], {
      env: cliEnv(),
    });
    await waitFor(() => watch.stdout().includes(`looprun reply ${run.id}`), {
      message: `watch saying how to reply\n${watch.output()}`,
    });
    expect(watch.stdout()).toContain(`blocked: the agent asks: ${QUESTION}`);

    const cli = await runCli(["reply", run.id, "hi, in lower case"], cliEnv());
    expect(cli.code, cli.output).toBe(0);
    const final = await waitForStatus(stack, run.id);
    expect(final.status).toBe("succeeded");
    expect(final.metrics.iterations).toBe(2);
    const budget = final.budget as typeof final.budget & { pausedMs: number };
    expect(budget.pausedMs).toBeGreaterThanOrEqual(1_000);
    expect(budget.elapsedMs).toBe(
      Date.parse(final.finishedAt!) - Date.parse(final.startedAt!) - budget.pausedMs,
    );
    expect((await watch.exited).code, watch.output()).toBe(0);
    expect(watch.stdout()).toContain("answered: hi, in lower case");
    const expected = "A person answered your question:\nhi, in lower case";
    expect(userText(fake.requests[1])).toContain(expected);
    expect(userText(fake.requests[1])).toContain(QUESTION);
    const iterations = await getIterations(stack, run.id);
    expect(iterations[0]?.feedback).toContain(expected);
    expect(iterations[1]?.prompt).toContain(expected);
    const types = (await getEvents(stack, run.id)).map((e) => e.type);
    expect(types).toContain("reply_received");
    expect(types.indexOf("reply_received")).toBeGreaterThan(types.indexOf("approval_requested"));
  });

  it("a reply starts the stall count over: a run two idle iterations into a stall goes on after it", async () => {
    const idle: Reply = finish("nothing to do");
    const blocked: Reply = finish("Which file?", "blocked");
    // Iterations 1-3 change nothing and fail alike (a stall count of 2); 4 asks; 5 and 6 idle.
    fake.replies(idle, idle, idle, blocked, idle, idle);
    const run = await submit(stack, greetingRun("test -f hello.txt", 6));
    const waiting = await waitForStatus(stack, run.id, ["awaiting_approval"]);
    expect(waiting).toMatchObject({ iteration: 4, approval: { kind: "question", iteration: 4 } });
    const reply = await stack.api("POST", `/api/runs/${run.id}/reply`, { message: "hello.txt" });
    expect(reply.status).toBe(202);
    // Without the reset, iteration 5 (idle again) would make the third in a row: `stalled`.
    const final = await waitForStatus(stack, run.id);
    expect(final).toMatchObject({ status: "failed", reason: "max_iterations", iteration: 6 });
  });
});
