import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type EventType, runCommandReview, runStep } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isAlive, makeRun, removeDir, resources, tempDir, waitFor } from "./support";

const sq = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

let ws: string;
let tools: string;
let store: MemoryRunStore;
beforeEach(async () => {
  ws = await tempDir("looprun-ws-");
  tools = await tempDir("looprun-tools-");
  store = new MemoryRunStore();
});
afterEach(async () => {
  await removeDir(ws);
  await removeDir(tools);
});

/** Writes greet.txt: "hello, world" once its prompt carries the fix plan, "hello" before. */
function agent(): string {
  const script = join(tools, "agent.sh");
  writeFileSync(
    script,
    [
      `cat > ${sq(tools)}/prompt-$LOOPRUN_ITERATION.txt`,
      `if grep -q 'Write hello, world into greet.txt' ${sq(tools)}/prompt-$LOOPRUN_ITERATION.txt; then`,
      "  echo 'hello, world' > greet.txt",
      "else",
      "  echo hello > greet.txt",
      "fi",
    ].join("\n"),
  );
  return `sh ${sq(script)}`;
}

/** Keeps its stdin (outside the workspace); blocks until greet.txt says "hello, world". */
function reviewer(): string {
  const script = join(tools, "reviewer.sh");
  writeFileSync(
    script,
    [
      `n=$(ls ${sq(tools)} | grep -c '^review-in-')`,
      `cat > ${sq(tools)}/review-in-$((n + 1)).json`,
      "echo 'reviewing on stderr' >&2",
      "if grep -q 'hello, world' greet.txt; then",
      `  echo '{"blockingIssues": [], "nonBlockingIssues": ["say it louder"], "score": 92, "fixPlan": []}'`,
      "else",
      `  echo '{"blockingIssues": ["greet.txt must greet the world"], "nonBlockingIssues": [], "score": 40, "fixPlan": ["Write hello, world into greet.txt", "Keep the newline"]}'`,
      "fi",
    ].join("\n"),
  );
  return `sh ${sq(script)}`;
}

/** The reviewer `command` run on its own (no run around it), on a review of nothing. */
const reviewDirectly = (command: string, timeoutMs: number, workspace: string) =>
  runCommandReview({
    spec: { type: "command", command, timeoutMs },
    review: { task: "t", requirements: null, iteration: 1, diff: "", validation: [] },
    workspace,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    timeoutMs,
    signal: new AbortController().signal,
  });

const reviewInputs = () =>
  readdirSync(tools)
    .filter((f) => f.startsWith("review-in-"))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(tools, f), "utf8")));

const types = (runId: string): EventType[] => store.eventsOf(runId).map((e) => e.type);

describe("the command reviewer", () => {
  it("blocks once with a fix plan that reaches the next prompt, then approves", async () => {
    const run = makeRun(
      {
        task: "Greet the world in greet.txt",
        requirements: "greet.txt says hello, world",
        agent: { type: "command", command: agent() },
        testCommand: "test -f greet.txt",
        review: { type: "command", command: reviewer() },
        cooldownMs: 0,
      },
      ws,
    );
    store.add(run);
    expect(await runStep(resources(store), run.id)).toEqual({
      kind: "finished",
      status: "succeeded",
      reason: "success",
    });

    const final = (await store.getRun(run.id))!;
    expect(final.metrics).toMatchObject({
      iterations: 2,
      validationFailures: 0,
      reviewBlockings: 1,
    });
    const reviews = store.reviewsOf(run.id);
    expect(reviews).toHaveLength(2);
    expect(reviews[0]).toMatchObject({
      runId: run.id,
      sessionId: run.sessionId,
      phase: "review",
      iteration: 1,
      blockingIssues: ["greet.txt must greet the world"],
      nonBlockingIssues: [],
      score: 40,
      fixPlan: ["Write hello, world into greet.txt", "Keep the newline"],
    });
    expect(reviews[1]).toMatchObject({
      iteration: 2,
      blockingIssues: [],
      nonBlockingIssues: ["say it louder"],
      score: 92,
    });
    expect(final.latestReviewId).toBe(reviews[1]?.id);

    const its = store.iterationsOf(run.id);
    expect(its.map((i) => [i.n, i.status, i.outcome, i.reviewId])).toEqual([
      [1, "failed", "review_blocking", reviews[0]?.id],
      [2, "passed", "complete", reviews[1]?.id],
    ]);
    expect(its[0]?.feedback).toContain("greet.txt must greet the world");
    expect(its[0]?.feedback).toContain("1. Write hello, world into greet.txt\n2. Keep the newline");
    // The fix plan is the next iteration's feedback: in its prompt, which the agent acted on.
    expect(its[1]?.prompt).toContain("# Feedback from the previous iteration");
    expect(its[1]?.prompt).toContain("Write hello, world into greet.txt");
    expect(readFileSync(join(tools, "prompt-2.txt"), "utf8")).toBe(its[1]?.prompt);
    expect(its[0]?.prompt).not.toContain("Write hello, world");
    expect(its[0]?.prompt).toContain(
      "a command reviewer of your change must find no blocking issue",
    );
    expect(readFileSync(join(ws, "greet.txt"), "utf8")).toBe("hello, world\n");

    // The reviewer's stdin: exactly the protocol's fields; the diff is the run's change so far.
    const [in1, in2] = reviewInputs();
    expect(Object.keys(in1).sort()).toEqual([
      "diff",
      "iteration",
      "requirements",
      "task",
      "validation",
    ]);
    expect(in1).toMatchObject({
      task: "Greet the world in greet.txt",
      requirements: "greet.txt says hello, world",
      iteration: 1,
      validation: [{ command: "test -f greet.txt", exitCode: 0 }],
    });
    expect(in1.diff).toContain("+++ b/greet.txt");
    expect(in1.diff).toContain("+hello\n");
    expect(in2.iteration).toBe(2);
    expect(in2.diff).toContain("+hello, world\n");
    expect(in2.diff).not.toContain("+hello\n");

    expect(types(run.id)).toEqual([
      "run_started",
      "iteration_started",
      "agent_started",
      "agent_finished",
      "validation_passed",
      "review_blocking_detected",
      "iteration_started",
      "agent_started",
      "agent_finished",
      "validation_passed",
      "review_approved",
      "run_finished",
    ]);
    const events = store.eventsOf(run.id);
    expect(events.find((e) => e.type === "review_blocking_detected")?.data).toMatchObject({
      iteration: 1,
      reviewId: reviews[0]?.id,
      blockingIssues: 1,
      nonBlockingIssues: 0,
      score: 40,
      fixPlan: ["Write hello, world into greet.txt", "Keep the newline"],
      budget: { remainingIterations: 5 },
    });
    expect(events.find((e) => e.type === "review_approved")?.data).toMatchObject({
      iteration: 2,
      reviewId: reviews[1]?.id,
      blockingIssues: 0,
      nonBlockingIssues: 1,
      score: 92,
    });
  });

  it("approves as its reviewer ends, killing what the reviewer left in the background", async () => {
    // The background child holds the reviewer's stdout and stderr: the review is over when
    // the reviewer is (an agent's command ends the same way), not when they are closed — held
    // until its timeout, the review would fail the run.
    const approve = `{"blockingIssues": [], "nonBlockingIssues": [], "score": 90, "fixPlan": []}`;
    const run = makeRun(
      {
        agent: { type: "command", command: "echo hi > out.txt" },
        testCommand: "true",
        review: {
          type: "command",
          command: `sleep 700 & echo $! > ${sq(join(tools, "bg.pid"))}; echo 'left one behind' >&2; echo ${sq(approve)}`,
          timeoutMs: 20_000,
        },
        cooldownMs: 0,
      },
      ws,
    );
    store.add(run);
    const result = await runStep(resources(store), run.id);
    expect((await store.getRun(run.id))?.summary).toBe("succeeded after 1 iteration");
    expect(result).toEqual({ kind: "finished", status: "succeeded", reason: "success" });
    expect(store.reviewsOf(run.id)).toMatchObject([{ blockingIssues: [], score: 90 }]);
    const pid = Number(readFileSync(join(tools, "bg.pid"), "utf8"));
    await waitFor(() => !isAlive(pid), "the reviewer's background child to die");
  });

  it("approves though its reviewer logs far more than is kept of its stderr", async () => {
    const approve = `{"blockingIssues": [], "nonBlockingIssues": [], "score": 80, "fixPlan": []}`;
    const run = makeRun(
      {
        agent: { type: "command", command: "echo hi > out.txt" },
        testCommand: "true",
        review: {
          type: "command",
          command: `for i in $(seq 1 3000); do echo "warning line $i" >&2; done; echo ${sq(approve)}`,
        },
        cooldownMs: 0,
      },
      ws,
    );
    store.add(run);
    await runStep(resources(store), run.id);
    expect((await store.getRun(run.id))?.summary).toBe("succeeded after 1 iteration");
    expect(store.reviewsOf(run.id)).toMatchObject([{ score: 80 }]);
  });

  it("quotes what a reviewer that timed out said on stderr", async () => {
    const outcome = await reviewDirectly("echo err-before-hang >&2; sleep 30", 800, ws);
    expect(outcome).toEqual({ ok: false, error: "the reviewer timed out: err-before-hang" });
  });

  it("says why a reviewer could not start", async () => {
    const outcome = await reviewDirectly("true", 10_000, join(ws, "not-there"));
    expect(outcome).toEqual({
      ok: false,
      error: expect.stringMatching(/^the reviewer could not start: .*not-there.* does not exist/),
    });
  });

  it("records the passed validation as the review starts, not once it is over", async () => {
    // The reviewer says it runs, then waits for the test's go.
    const reviewing = join(tools, "reviewing");
    const go = join(tools, "go");
    const run = makeRun(
      {
        task: "Greet",
        agent: { type: "command", command: "echo hello > greet.txt" },
        testCommand: "test -f greet.txt",
        review: {
          type: "command",
          command: `touch ${sq(reviewing)}; while [ ! -f ${sq(go)} ]; do sleep 0.02; done; echo '{"blockingIssues": [], "nonBlockingIssues": [], "score": 90, "fixPlan": []}'`,
        },
        cooldownMs: 0,
      },
      ws,
    );
    store.add(run);
    const step = runStep(resources(store), run.id);
    try {
      for (let wait = 0; !readdirSync(tools).includes("reviewing"); wait++) {
        if (wait > 500) throw new Error("the reviewer never ran");
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(types(run.id).slice(-2)).toEqual(["agent_finished", "validation_passed"]);
      expect(store.eventsOf(run.id).at(-1)?.data).toMatchObject({
        iteration: 1,
        results: [{ command: "test -f greet.txt", exitCode: 0 }],
      });
      expect(store.iterationsOf(run.id)[0]).toMatchObject({
        status: "running",
        validation: [{ command: "test -f greet.txt", exitCode: 0 }],
      });
      expect((await store.getRun(run.id))?.progress).toContain("reviewing the change (command)");
    } finally {
      // The reviewer goes on (and ends) whatever the checks above said.
      writeFileSync(go, "");
    }
    expect(await step).toMatchObject({ kind: "finished", status: "succeeded" });
    expect(types(run.id).slice(-4)).toEqual([
      "agent_finished",
      "validation_passed",
      "review_approved",
      "run_finished",
    ]);
  });

  it("is skipped while validation fails: no reviewer time on a change that goes back anyway", async () => {
    const run = makeRun(
      {
        agent: {
          type: "command",
          command: `${agent()}; test "$LOOPRUN_ITERATION" = 1 && rm greet.txt; true`,
        },
        testCommand: "test -f greet.txt",
        review: { type: "command", command: reviewer() },
        cooldownMs: 0,
        maxIterations: 2,
      },
      ws,
    );
    store.add(run);
    await runStep(resources(store), run.id);
    const its = store.iterationsOf(run.id);
    expect(its.map((i) => [i.n, i.outcome, i.reviewId === null])).toEqual([
      [1, "validation_failed", true],
      [2, "review_blocking", false],
    ]);
    expect(reviewInputs().map((r) => r.iteration)).toEqual([2]);
    expect(types(run.id).slice(4, 6)).toEqual(["validation_failed", "iteration_started"]);
    // The review blocked the last allowed iteration: the budget ends the run, not an approval.
    expect(await store.getRun(run.id)).toMatchObject({
      status: "failed",
      reason: "max_iterations",
    });
  });

  it.each([
    [
      "prints something that is not JSON",
      "echo looks good to me",
      "invalid reviewer output (the answer is not valid JSON)",
    ],
    [
      "prints JSON of the wrong shape",
      `echo '{"blockingIssues": [], "nonBlockingIssues": [], "score": 150, "fixPlan": []}'`,
      "invalid reviewer output (score:",
    ],
    ["prints nothing", "true", "invalid reviewer output"],
    [
      "exits non-zero",
      `echo '{"blockingIssues": [], "nonBlockingIssues": [], "score": 90, "fixPlan": []}'; echo broke >&2; exit 3`,
      "the reviewer exited 3: broke",
    ],
    ["exits non-zero saying nothing", "exit 1", "the reviewer exited 1 (nothing on stderr)"],
    [
      "exits non-zero leaving a child that holds its stderr (what it said is kept)",
      "echo early >&2; sleep 30 & exit 1",
      "the reviewer exited 1: early",
    ],
    [
      "exits 125 (its own status, not a wrapper's failure)",
      `echo '{"blockingIssues": []}'; exit 125`,
      "the reviewer exited 125 (nothing on stderr)",
    ],
    [
      "exits non-zero after logging much (its last words are quoted)",
      "echo start >&2; head -c 100000 /dev/zero | tr '\\0' y >&2; echo FATAL: broke >&2; exit 3",
      /the reviewer exited 3: y+FATAL: broke$/,
    ],
    [
      "prints without end (stopped after a review's most, not at its timeout)",
      "yes looks good",
      "the reviewer printed more than 1048576 bytes (it was stopped there)",
    ],
    [
      "prints more than a review may have, and exits 0",
      "head -c 1048577 /dev/zero | tr '\\0' a",
      "the reviewer printed more than 1048576 bytes",
    ],
  ])(
    "fails the run with phase_failed when it %s, never approving",
    async (_what, command, error) => {
      const run = makeRun(
        {
          agent: { type: "command", command: "echo hi > out.txt" },
          testCommand: "true",
          review: { type: "command", command },
          cooldownMs: 0,
        },
        ws,
      );
      store.add(run);
      expect(await runStep(resources(store), run.id)).toEqual({
        kind: "finished",
        status: "failed",
        reason: "error",
      });
      const final = (await store.getRun(run.id))!;
      expect(final.summary).toMatch(/^phase_failed: review: /);
      expect(final.summary).toMatch(error);
      expect(final.latestReviewId).toBeNull();
      expect(final.metrics.reviewBlockings).toBe(0);
      expect(store.reviewsOf(run.id)).toEqual([]);
      expect(store.iterationsOf(run.id).map((i) => [i.status, i.outcome, i.reviewId])).toEqual([
        ["failed", "error", null],
      ]);
      expect(types(run.id)).toEqual([
        "run_started",
        "iteration_started",
        "agent_started",
        "agent_finished",
        "validation_passed",
        "phase_failed",
        "run_finished",
      ]);
      expect(store.eventsOf(run.id).at(-2)?.data).toMatchObject({
        iteration: 1,
        phase: "review",
        skipped: [],
      });
      expect(String(store.eventsOf(run.id).at(-2)?.data.error)).toMatch(error);
    },
  );
});
