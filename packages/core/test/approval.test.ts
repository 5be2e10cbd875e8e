import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  budgetView,
  endWait,
  feedbackWithReply,
  MistralChatModel,
  normalizeSubmission,
  planFromEdit,
  RunSubmission,
  runStep,
} from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  FakeMistral,
  finish,
  type ReceivedRequest,
  type Reply,
} from "../../../tests/support/fake-mistral";
import { makeRun, removeDir, resources, tempDir } from "./support";

/** What the API does on approve/reply (packages/db/src/approvals.ts), on the memory store. */
function answer(store: MemoryRunStore, runId: string, now: number, reply?: string) {
  const run = store.runs.get(runId)!;
  if (reply !== undefined) {
    const blocked = store.iterationsOf(runId).at(-1)!;
    blocked.feedback = feedbackWithReply(blocked.feedback, reply);
  }
  Object.assign(run, endWait(run, now), { status: "queued" });
}

const userText = (req: ReceivedRequest | undefined) =>
  (req?.messages ?? [])
    .filter((m) => m.role === "user")
    .map((m) => String(m.content))
    .join("\n");

const PLAN: Reply = {
  content: JSON.stringify({
    steps: [{ title: "Read bug.txt" }, { title: "Write fixed into bug.txt" }],
  }),
};
const FIX: Reply = {
  toolCalls: [
    { name: "workspace__write_file", arguments: { path: "bug.txt", content: "fixed\n" } },
  ],
};
const DONE: Reply = finish("ok");

describe("plan approval and blocked agents (real SDK → fake Mistral)", () => {
  const fake = new FakeMistral();
  let llm: MistralChatModel;
  let dir: string;
  let workspace: string;
  let clock: number;
  const now = () => clock;

  beforeAll(async () => {
    await fake.start();
    llm = new MistralChatModel({
      apiKey: "test-key-0123456789",
      serverURL: fake.url,
      timeoutMs: 20_000,
      retry: { initialIntervalMs: 10, maxIntervalMs: 100, maxElapsedMs: 5000 },
    });
  });
  afterAll(() => fake.stop());
  beforeEach(async () => {
    fake.reset();
    clock = Date.now();
    dir = await tempDir();
    workspace = join(dir, "ws");
    mkdirSync(workspace);
    writeFileSync(join(workspace, "bug.txt"), "broken\n");
    return () => removeDir(dir);
  });

  const mistralRun = (extra: Record<string, unknown> = {}) =>
    makeRun(
      {
        task: "Fix bug.txt so that it says fixed",
        agent: { type: "mistral", model: "mistral-small-latest", plan: true },
        testCommand: "grep -q fixed bug.txt",
        cooldownMs: 0,
        approval: "plan",
        ...extra,
      },
      workspace,
    );
  /** A run whose agent does not plan and that waits for no approval, unless it asks. */
  const questionRun = (extra: Record<string, unknown> = {}) =>
    mistralRun({
      agent: { type: "mistral", model: "mistral-small-latest" },
      approval: undefined,
      ...extra,
    });

  it("plans before iteration 1, waits with the clock paused, and goes on with the edited plan once approved", async () => {
    fake.replies(PLAN, FIX, DONE);
    const store = new MemoryRunStore();
    const run = mistralRun({ maxMinutes: 1 });
    store.add(run);
    const res = resources(store, { llm, now });

    expect(await runStep(res, run.id)).toEqual({ kind: "awaiting_approval" });
    const waiting = (await store.getRun(run.id))!;
    expect(waiting.status).toBe("awaiting_approval");
    expect(waiting.plan?.steps.map((s) => s.title)).toEqual([
      "Read bug.txt",
      "Write fixed into bug.txt",
    ]);
    expect(waiting.approval).toMatchObject({ kind: "plan", iteration: 0, resolvedAt: null });
    expect(waiting.approval?.plan).toContain("Write fixed into bug.txt");
    expect(waiting.progress).toContain("awaiting approval of the plan");
    expect(store.iterationsOf(run.id)).toEqual([]);
    expect(store.eventsOf(run.id).map((e) => e.type)).toEqual([
      "run_started",
      "plan_created",
      "approval_requested",
    ]);
    // The plan was asked as JSON, before any tool was offered.
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]?.response_format?.type).toBe("json_object");
    expect(userText(fake.requests[0])).toContain("Fix bug.txt");

    // A stale job of the waiting run does nothing.
    expect(await runStep(res, run.id)).toEqual({ kind: "awaiting_approval" });
    expect(fake.requests).toHaveLength(1);

    // Two minutes pass (longer than the run's whole budget): they do not count.
    const deadlineBefore = waiting.deadlineAt!;
    clock += 60_000;
    expect(budgetView((await store.getRun(run.id))!, clock).elapsedMs).toBe(0);
    clock += 60_000;
    const edited = planFromEdit(waiting.plan, {
      steps: [{ title: "EDITED: write fixed into bug.txt", detail: "one write" }],
    });
    answer(store, run.id, clock);
    store.runs.get(run.id)!.plan = edited;

    const result = await runStep(res, run.id);
    expect(result).toMatchObject({ kind: "finished", status: "succeeded" });
    const done = (await store.getRun(run.id))!;
    expect(done.pausedMs).toBe(120_000);
    expect(done.deadlineAt).toBe(deadlineBefore + 120_000);
    expect(budgetView(done, clock).elapsedMs).toBe(0);
    // The agent did not plan again: it worked with the edited plan.
    expect(fake.requests).toHaveLength(3);
    expect(fake.requests.slice(1).every((r) => r.response_format === undefined)).toBe(true);
    // The person's step, with its detail, is what the agent reads.
    expect(userText(fake.requests[1])).toContain(
      "[ ] 1. EDITED: write fixed into bug.txt\n      one write",
    );
    expect(readFileSync(join(workspace, "bug.txt"), "utf8")).toBe("fixed\n");
    const types = store.eventsOf(run.id).map((e) => e.type);
    expect(types.filter((t) => t === "run_started")).toHaveLength(1);
    for (const e of store.eventsOf(run.id)) expect(e.data.budget.elapsedMs).toBe(0);
  });

  it("a question starts the stall count over: the iterations after the reply are not stalled by the ones before it", async () => {
    const IDLE: Reply = finish("nothing to do");
    fake.replies(finish("Which case?", "blocked"), IDLE, IDLE);
    const store = new MemoryRunStore();
    const seeded = questionRun({ maxIterations: 3 });
    // Two iterations without progress before this step (the default ends a run at three).
    const run = { ...seeded, stalledIterations: 2 };
    store.add(run);
    const res = resources(store, { llm, now });

    expect(await runStep(res, run.id)).toEqual({ kind: "awaiting_approval" });
    expect((await store.getRun(run.id))!.stalledIterations).toBe(0);
    clock += 1_000;
    answer(store, run.id, clock, "lower case");
    // The two idle iterations after the reply count 1 and 2: the budget ends the run.
    expect(await runStep(res, run.id)).toMatchObject({
      status: "failed",
      reason: "max_iterations",
    });
    expect(store.iterationsOf(run.id)).toHaveLength(3);
    expect((await store.getRun(run.id))!.stalledIterations).toBe(2);
  });

  it("a blocked agent waits for a reply; the reply is the next iteration's feedback", async () => {
    const QUESTION = "Should bug.txt say fixed or FIXED?";
    fake.replies(finish(QUESTION, "blocked"), FIX, DONE);
    const store = new MemoryRunStore();
    const run = questionRun();
    store.add(run);
    const res = resources(store, { llm, now });

    expect(await runStep(res, run.id)).toEqual({ kind: "awaiting_approval" });
    const waiting = (await store.getRun(run.id))!;
    expect(waiting.approval).toMatchObject({ kind: "question", iteration: 1, question: QUESTION });
    expect(waiting.progress).toContain(QUESTION);
    expect(waiting.consecutiveFailures).toBe(0);
    expect(waiting.metrics.iterations).toBe(1);
    const [first] = store.iterationsOf(run.id);
    expect(first).toMatchObject({ status: "failed", outcome: "validation_failed" });
    expect(first?.feedback).toContain(QUESTION);
    const requested = store.eventsOf(run.id).find((e) => e.type === "approval_requested");
    expect(requested?.data).toMatchObject({ kind: "question", question: QUESTION, iteration: 1 });

    clock += 30_000;
    answer(store, run.id, clock, "fixed, in lower case");
    expect(await runStep(res, run.id)).toMatchObject({ kind: "finished", status: "succeeded" });
    const second = store.iterationsOf(run.id)[1];
    expect(second?.prompt).toContain("A person answered your question:\nfixed, in lower case");
    expect(userText(fake.requests[1])).toContain("A person answered your question");
    expect((await store.getRun(run.id))?.pausedMs).toBe(30_000);
  });

  it("a stop requested while the plan is made wins over the pause", async () => {
    fake.replies(PLAN);
    const store = new MemoryRunStore();
    const run = mistralRun();
    store.add(run);
    const stop = new AbortController();
    stop.abort();
    const result = await runStep(resources(store, { llm, now }), run.id, { stop: stop.signal });
    expect(result).toMatchObject({ kind: "finished", status: "stopped" });
    expect(fake.requests).toHaveLength(0);
  });
});

describe("plan approval with the planning phase (command agent)", () => {
  let ws: string;
  beforeEach(async () => {
    ws = await tempDir("looprun-ws-");
    return () => removeDir(ws);
  });

  it("pauses right after the planning artifact is stored, before the other phases", async () => {
    const agent = [
      'if [ -n "$LOOPRUN_PHASE" ]; then echo "PLAN-OF-$LOOPRUN_PHASE"; exit 0; fi',
      "touch done",
    ].join("\n");
    const run = makeRun(
      {
        agent: { type: "command", command: agent },
        testCommand: "test -f done",
        phases: ["planning", "architecture"],
        approval: "plan",
        cooldownMs: 0,
      },
      ws,
    );
    const store = new MemoryRunStore();
    store.add(run);
    const res = resources(store);
    expect(await runStep(res, run.id)).toEqual({ kind: "awaiting_approval" });
    expect(store.phaseArtifactList.map((a) => a.phase)).toEqual(["planning"]);
    expect((await store.getRun(run.id))?.approval?.plan).toContain("PLAN-OF-planning");

    answer(store, run.id, Date.now());
    expect(await runStep(res, run.id)).toMatchObject({ kind: "finished", status: "succeeded" });
    expect(store.phaseArtifactList.map((a) => a.phase).sort()).toEqual([
      "architecture",
      "planning",
    ]);
  });
});

describe("the approval option", () => {
  const base = { task: "t", testCommand: "true" };
  it('needs a plan to approve: refused without {"plan": true} or the planning phase', () => {
    const refused = RunSubmission.safeParse({
      ...base,
      agent: { type: "command", command: "true" },
      approval: "plan",
    });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues.map((i) => i.path.join("."))).toEqual(["approval"]);
    for (const ok of [
      { agent: { type: "mistral", plan: true }, approval: "plan" },
      { agent: { type: "command", command: "x" }, phases: ["planning"], approval: "plan" },
      { agent: { type: "command", command: "x" }, approval: "none" },
    ]) {
      expect(RunSubmission.safeParse({ ...base, ...ok }).success).toBe(true);
    }
    expect(
      normalizeSubmission(RunSubmission.parse({ ...base, agent: { type: "mistral" } })).approval,
    ).toBe("none");
  });
});
