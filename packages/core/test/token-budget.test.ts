import { runStep } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { describe, expect, it } from "vitest";
import { finish, type Reply } from "../../../tests/support/fake-mistral";
import { mistralFixture } from "./mistral-fixture";
import { resources } from "./support";

// `maxTokens` with the mistral agent (real SDK → fake Mistral, real MCP workspace server).

const LIST = { name: "workspace__list_directory", arguments: { path: "." } };

describe("the token budget", () => {
  const fx = mistralFixture();
  const { fake } = fx;

  /** Runs a mistral run until it ends, which must be by its token budget. */
  async function runOutOfTokens(extra: Record<string, unknown>) {
    const store = new MemoryRunStore();
    const run = fx.run({ maxIterations: 5, ...extra });
    store.add(run);
    const result = await runStep(resources(store, { llm: fx.llm }), run.id);
    expect(result).toMatchObject({ kind: "finished", status: "failed", reason: "max_tokens" });
    const stored = (await store.getRun(run.id))!;
    expect(stored.summary).toBe("failed_budget_exhausted");
    const exhausted = store.eventsOf(run.id).filter((e) => e.type === "budget_exhausted");
    expect(exhausted.map((e) => e.data.reason)).toEqual(["max_tokens"]);
    return { iterations: store.iterationsOf(run.id), stored };
  }

  it("ends the run with max_tokens when it runs out during the agent's turn: the iteration is the budget's, not a failed agent's", async () => {
    fake.replies({ toolCalls: [LIST], tokens: 150 });
    const { iterations, stored } = await runOutOfTokens({ maxTokens: 400 });
    expect(stored.metrics.tokens).toBe(450);
    // One iteration: cut at 450 of 400 tokens, it ends the run without another.
    expect(iterations.map((i) => [i.n, i.status, i.outcome])).toEqual([
      [1, "failed", "budget_exhausted"],
    ]);
    expect(iterations[0]?.agent?.output).toContain("the token budget is spent");
    expect(iterations[0]?.feedback).toMatch(
      /^The token budget ran out during the agent's turn\.\n\nValidation failed:/,
    );
    expect(stored.consecutiveFailures).toBe(0);
  });

  it("ends with max_tokens, not consecutive_failures, when the budget cuts the turn after two failed agent phases", async () => {
    // Two calls per iteration at 100 tokens reach maxToolCalls (a failed agent phase); the
    // third iteration's first call costs 200 and spends the budget of 500 before a second.
    fake.respond((_req, i): Reply => ({ toolCalls: [LIST], tokens: i === 4 ? 200 : 100 }));
    const agent = { type: "mistral", model: "mistral-small-latest", maxToolCalls: 2 };
    const { iterations, stored } = await runOutOfTokens({ maxTokens: 500, agent });
    expect(iterations.map((i) => i.outcome)).toEqual([
      "agent_failed",
      "agent_failed",
      "budget_exhausted",
    ]);
    expect(stored.consecutiveFailures).toBe(2);
    expect(fake.requests).toHaveLength(5);
  });

  it("does not start an LLM review with the budget spent: the gates that passed do not make a success without it", async () => {
    fake.replies(
      {
        toolCalls: [
          { name: "workspace__write_file", arguments: { path: "bug.txt", content: "fixed\n" } },
        ],
        tokens: 450,
      },
      { ...finish("bug.txt says fixed"), tokens: 100 },
    );
    const { iterations, stored } = await runOutOfTokens({
      maxTokens: 500,
      review: { type: "mistral" },
    });
    // The agent's two calls, and no reviewer's.
    expect(fake.requests).toHaveLength(2);
    expect(stored.metrics.tokens).toBe(550);
    expect(stored.latestReviewId).toBeNull();
    expect(iterations.map((i) => [i.outcome, i.validation[0]?.exitCode])).toEqual([
      ["budget_exhausted", 0],
    ]);
    expect(iterations[0]?.feedback).toBe("The token budget ran out before the review was done.");
  });

  it("makes no further call of a review once the budget is spent between its calls (the triangular review's passes)", async () => {
    fake.replies(
      {
        toolCalls: [
          { name: "workspace__write_file", arguments: { path: "bug.txt", content: "fixed\n" } },
        ],
        tokens: 150,
      },
      { ...finish("bug.txt says fixed"), tokens: 100 },
      // The blind pass: 250 + 300 of 500 tokens.
      { content: "It writes 'fixed' to bug.txt.", tokens: 300 },
      { content: "{}", tokens: 100 },
    );
    const { iterations, stored } = await runOutOfTokens({
      maxTokens: 500,
      review: { type: "triangular" },
    });
    // The agent's two calls and the blind pass; no second pass.
    expect(fake.requests).toHaveLength(3);
    expect(stored.metrics.tokens).toBe(550);
    expect(stored.latestReviewId).toBeNull();
    expect(iterations.map((i) => [i.outcome, i.validation[0]?.exitCode])).toEqual([
      ["budget_exhausted", 0],
    ]);
    expect(iterations[0]?.feedback).toBe("The token budget ran out before the review was done.");
  });

  it("counts a negative token usage from the model's server as none: the budget still ends the run", async () => {
    fake.replies({ toolCalls: [LIST], tokens: -100_000 }, { toolCalls: [LIST], tokens: 150 });
    const { stored } = await runOutOfTokens({ maxTokens: 400 });
    // 150 a call after the first: the budget ends it at its 400 as if the first were free.
    expect(stored.metrics.tokens).toBe(450);
    expect(fake.requests).toHaveLength(4);
  });
});
