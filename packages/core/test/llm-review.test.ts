import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MistralChatModel, Redactor, runStep } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { FakeMistral, finish, type ReceivedRequest } from "../../../tests/support/fake-mistral";
import { makeRun, removeDir, resources, tempDir } from "./support";

const REQUIREMENT = "REQ-SUM-7: add(a, b) returns the sum of its two arguments";
const TASK = "Implement add in add.js";

const text = (req: ReceivedRequest) => req.messages.map((m) => String(m.content)).join("\n");
const system = (req: ReceivedRequest) => String(req.messages[0]?.content ?? "");

/** Writes add.js: a subtraction first, the sum once the prompt carries the fix plan. */
const AGENT =
  'p=$(cat); if printf "%s" "$p" | grep -q "Return a + b from add"; then ' +
  "echo 'export const add = (a, b) => a + b;' > add.js; else echo 'export const add = (a, b) => a - b;' > add.js; fi";

describe("LLM reviewers (real SDK → fake Mistral)", () => {
  const fake = new FakeMistral();
  let llm: MistralChatModel;
  let ws: string;
  let store: MemoryRunStore;

  beforeAll(async () => {
    await fake.start();
    llm = new MistralChatModel({
      apiKey: "mistral-test-key-0123456789",
      serverURL: fake.url,
      timeoutMs: 20_000,
      retry: { initialIntervalMs: 10, maxIntervalMs: 100, maxElapsedMs: 2000 },
    });
  });
  afterAll(() => fake.stop());
  beforeEach(async () => {
    fake.reset();
    ws = await tempDir("looprun-ws-");
    store = new MemoryRunStore();
    return () => removeDir(ws);
  });

  const seed = (review: Record<string, unknown>, extra: Record<string, unknown> = {}) => {
    const run = makeRun(
      {
        task: TASK,
        requirements: REQUIREMENT,
        agent: { type: "command", command: AGENT },
        testCommand: "test -f add.js",
        review,
        cooldownMs: 0,
        ...extra,
      },
      ws,
    );
    store.add(run);
    return run;
  };

  it("mistral: a structured review of the diff, validation and requirements; an invalid answer is asked for again", async () => {
    fake.respond((req, i) => {
      if (i === 0) return { content: "I think it is mostly fine" };
      if (text(req).includes("a - b")) {
        return {
          content: JSON.stringify({
            blockingIssues: ["add subtracts instead of adding"],
            nonBlockingIssues: ["name the file sum.js"],
            score: 30,
            fixPlan: ["Return a + b from add"],
          }),
        };
      }
      return {
        content: JSON.stringify({
          blockingIssues: [],
          nonBlockingIssues: [],
          score: 97,
          fixPlan: [],
        }),
      };
    });
    const run = seed({ type: "mistral", model: "mistral-small-latest" });
    expect(await runStep(resources(store, { llm }), run.id)).toMatchObject({ status: "succeeded" });

    expect(fake.requests).toHaveLength(3);
    const [first, retry, second] = fake.requests as [
      ReceivedRequest,
      ReceivedRequest,
      ReceivedRequest,
    ];
    expect(first.model).toBe("mistral-small-latest");
    expect(first.response_format).toEqual({ type: "json_object" });
    expect(first.tools).toBeUndefined();
    expect(text(first)).toContain(TASK);
    expect(text(first)).toContain(REQUIREMENT);
    expect(text(first)).toContain("`test -f add.js`: exit 0");
    expect(text(first)).toContain("+export const add = (a, b) => a - b;");
    expect(String(retry.messages.at(-1)?.content)).toContain(
      "That answer is invalid (the answer is not valid JSON)",
    );
    expect(text(second)).toContain("+export const add = (a, b) => a + b;");

    const reviews = store.reviewsOf(run.id);
    expect(reviews.map((r) => [r.iteration, r.blockingIssues, r.score])).toEqual([
      [1, ["add subtracts instead of adding"], 30],
      [2, [], 97],
    ]);
    expect(store.iterationsOf(run.id)[1]?.prompt).toContain("1. Return a + b from add");
    const final = (await store.getRun(run.id))!;
    expect(final.metrics).toMatchObject({ reviewBlockings: 1, tokens: 300 });
  });

  it("mistral: an invalid answer twice is a phase_failed, not an approval", async () => {
    fake.replies({ content: '{"blockingIssues": "none"}' });
    const run = seed({ type: "mistral" });
    expect(await runStep(resources(store, { llm }), run.id)).toEqual({
      kind: "finished",
      status: "failed",
      reason: "error",
    });
    expect(fake.requests).toHaveLength(2);
    expect(fake.requests[0]?.model).toBe("mistral-large-latest");
    expect(store.reviewsOf(run.id)).toEqual([]);
    const failed = store.eventsOf(run.id).find((e) => e.type === "phase_failed");
    expect(failed?.data).toMatchObject({ phase: "review" });
    expect(String(failed?.data.error)).toContain("invalid answer twice: blockingIssues:");
  });

  it("triangular: the blind pass sees only the diff, the second only the requirements and the reading", async () => {
    fake.respond((req) => {
      if (system(req).includes("blind code reviewer")) {
        return {
          content: text(req).includes("a - b")
            ? "add.js exports add(a, b), which returns a minus b."
            : "add.js exports add(a, b), which returns the total of a and b.",
        };
      }
      const minus = text(req).includes("minus");
      return {
        content: JSON.stringify({
          missedRequirements: minus ? ["add must return the sum"] : [],
          extraBehaviour: minus ? ["it subtracts"] : ["exports an ES module"],
          likelyBugs: minus ? ["the result has the wrong sign for the second argument"] : [],
          score: minus ? 15 : 90,
          fixPlan: minus ? ["Return a + b from add"] : [],
        }),
      };
    });
    const run = seed({ type: "triangular", model: "mistral-medium-latest" });
    expect(await runStep(resources(store, { llm }), run.id)).toMatchObject({ status: "succeeded" });

    const blind = fake.requests.filter((r) => system(r).includes("blind code reviewer"));
    const compare = fake.requests.filter((r) => !system(r).includes("blind code reviewer"));
    expect(blind).toHaveLength(2);
    expect(compare).toHaveLength(2);
    for (const req of blind) {
      expect(text(req)).toContain("diff --git a/add.js b/add.js");
      expect(text(req)).not.toContain("REQ-SUM-7");
      expect(text(req)).not.toContain(TASK);
      expect(req.response_format).toBeUndefined();
    }
    for (const req of compare) {
      expect(text(req)).toContain(REQUIREMENT);
      expect(text(req)).toContain(TASK);
      expect(text(req)).not.toContain("diff --git");
      expect(text(req)).not.toContain("export const add");
      expect(text(req)).not.toContain("=>");
      expect(req.response_format).toEqual({ type: "json_object" });
      expect(req.model).toBe("mistral-medium-latest");
    }
    expect(text(compare[0]!)).toContain("returns a minus b");

    const [first, second] = store.reviewsOf(run.id);
    expect(first).toMatchObject({
      iteration: 1,
      blockingIssues: [
        "Requirement missed: add must return the sum",
        "Likely bug: the result has the wrong sign for the second argument",
      ],
      nonBlockingIssues: ["Extra behaviour: it subtracts"],
      score: 15,
      fixPlan: ["Return a + b from add"],
    });
    expect(second).toMatchObject({
      iteration: 2,
      blockingIssues: [],
      nonBlockingIssues: ["Extra behaviour: exports an ES module"],
      score: 90,
    });
    const blocking = store.eventsOf(run.id).find((e) => e.type === "review_blocking_detected");
    expect(blocking?.data).toMatchObject({
      blockingIssues: 2,
      nonBlockingIssues: 1,
      reading: "add.js exports add(a, b), which returns a minus b.",
    });
    expect(store.iterationsOf(run.id).map((i) => i.outcome)).toEqual([
      "review_blocking",
      "complete",
    ]);
  });

  it.each(["mistral", "triangular"])(
    "%s: the review's model is sent the change with the workers' secrets redacted",
    async (type) => {
      const secret = "worker-secret-value-0123456789";
      fake.respond(() => ({
        content: JSON.stringify({
          blockingIssues: [],
          nonBlockingIssues: [],
          score: 90,
          fixPlan: [],
          // The triangular review's passes: a reading of the change, then a comparison.
          description: "adds a key file",
          missedRequirements: [],
          extraBehaviour: [],
        }),
      }));
      const run = makeRun(
        {
          task: TASK,
          agent: { type: "command", command: `echo 'key=${secret}' > key.txt; echo ${secret}` },
          testCommand: "cat key.txt",
          review: { type, model: "mistral-small-latest" },
        },
        ws,
      );
      store.add(run);
      await runStep(resources(store, { llm, redactor: new Redactor([secret]) }), run.id);
      expect(fake.requests.length).toBeGreaterThan(0);
      for (const req of fake.requests) expect(text(req)).not.toContain(secret);
      // The blind pass (triangular) or the review (mistral) did see the change, redacted.
      expect(text(fake.requests[0]!)).toContain("+key=[REDACTED]");
    },
  );

  it("the review's feedback reaches the next prompt as it is stored: with the workers' secrets redacted", async () => {
    const secret = "worker-secret-value-0123456789";
    let reviews = 0;
    fake.respond(() => {
      reviews += 1;
      return {
        content: JSON.stringify({
          // The reviewer repeats a secret it was never sent (its vendor may know it).
          blockingIssues: reviews === 1 ? [`the token ${secret} is hard-coded`] : [],
          nonBlockingIssues: [],
          score: reviews === 1 ? 20 : 90,
          fixPlan: [],
        }),
      };
    });
    // The agent keeps each prompt it is given, outside the workspace (not in the reviewed diff).
    const prompts = await tempDir("looprun-prompts-");
    try {
      const run = seed(
        { type: "mistral", model: "mistral-small-latest" },
        {
          agent: {
            type: "command",
            command: `cat > ${prompts}/$LOOPRUN_ITERATION.txt; echo $LOOPRUN_ITERATION > add.js`,
          },
        },
      );
      await runStep(resources(store, { llm, redactor: new Redactor([secret]) }), run.id);
      expect(store.iterationsOf(run.id).map((i) => i.outcome)).toEqual([
        "review_blocking",
        "complete",
      ]);
      const stored = store.iterationsOf(run.id)[1]!.prompt;
      const given = readFileSync(join(prompts, "2.txt"), "utf8");
      expect(stored).toContain("the token [REDACTED] is hard-coded");
      expect(given).toBe(stored);
      expect(given).not.toContain(secret);
    } finally {
      await removeDir(prompts);
    }
  });

  it("a mistral agent's preparation phase is one LLM call, and its answer is in the implementation prompt", async () => {
    writeFileSync(join(ws, "notes.txt"), "x\n");
    fake.respond((req) =>
      req.tools === undefined
        ? { content: "PLAN-42: read notes.txt, then finish." }
        : finish("done"),
    );
    const run = makeRun(
      {
        task: TASK,
        agent: { type: "mistral", model: "mistral-small-latest" },
        testCommand: "true",
        phases: ["planning"],
      },
      ws,
    );
    store.add(run);
    expect(await runStep(resources(store, { llm }), run.id)).toMatchObject({ status: "succeeded" });
    expect(fake.requests).toHaveLength(2);
    expect(text(fake.requests[0]!)).toContain("# Phase: planning");
    expect(text(fake.requests[1]!)).toContain("PLAN-42: read notes.txt, then finish.");
    expect((await store.phaseArtifacts(run.id)).map((a) => [a.phase, a.content])).toEqual([
      ["planning", "PLAN-42: read notes.txt, then finish."],
    ]);
    expect((await store.getRun(run.id))?.metrics.tokens).toBe(200);
  });
});
