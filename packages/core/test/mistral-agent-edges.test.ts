import { runStep } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { describe, expect, it } from "vitest";
import type { Reply } from "../../../tests/support/fake-mistral";
import { mistralFixture } from "./mistral-fixture";
import { resources } from "./support";

// Answers of the model that are not a normal turn: none, cut short, unparseable calls.

/** A 200 answer with these choices, as the vendor could send it. */
const answer = (choices: unknown[]): Reply => ({
  status: 200,
  body: {
    id: "x",
    object: "chat.completion",
    created: 1,
    model: "m",
    usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 },
    choices,
  },
});

describe("the mistral agent on unusual answers", () => {
  const fx = mistralFixture();

  async function iterate(replies: Reply[]) {
    fx.fake.replies(...replies);
    const store = new MemoryRunStore();
    const run = fx.run({ maxIterations: 1 });
    store.add(run);
    await runStep(resources(store, { llm: fx.llm }), run.id);
    return { store, run, it1: store.iterationsOf(run.id)[0]! };
  }

  it("counts an answer without choices as the agent failing", async () => {
    const { it1 } = await iterate([answer([])]);
    expect(it1.agent?.exitCode).toBe(1);
    expect(it1.agent?.output).toContain("no choices");
  });

  it("counts an answer cut at the length limit as the agent failing, and says so", async () => {
    const { it1 } = await iterate([
      answer([
        {
          index: 0,
          finish_reason: "length",
          message: { role: "assistant", content: "I will now write the fi", tool_calls: null },
        },
      ]),
    ]);
    expect(it1.agent?.exitCode).toBe(1);
    expect(it1.agent?.output).toContain("I will now write the fi");
    expect(it1.agent?.output).toContain("length limit");
  });
});
