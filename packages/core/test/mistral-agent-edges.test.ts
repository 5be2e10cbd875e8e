import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runStep } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { describe, expect, it } from "vitest";
import { completion as answer, finish, type Reply } from "../../../tests/support/fake-mistral";
import { mistralFixture } from "./mistral-fixture";
import { resources } from "./support";

// Answers of the model that are not a normal turn: none, cut short, unparseable calls.

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

  it("records a call with unparseable arguments as a failed call, and sends {} back in the history", async () => {
    const { store, run } = await iterate([
      {
        toolCalls: [
          { name: "workspace__write_file", arguments: '{"path":"bug.txt","content":"fix' },
        ],
      },
      finish("x"),
    ]);
    const calls = store.toolCalls.filter((c) => c.runId === run.id);
    expect(calls.map((c) => [c.server, c.tool, c.isError])).toEqual([
      ["workspace", "write_file", true],
    ]);
    expect(calls[0]?.result).toContain("not valid JSON");
    expect(store.eventsOf(run.id).filter((e) => e.type === "tool_called")).toHaveLength(1);
    expect((await store.getRun(run.id))!.metrics).toMatchObject({ toolCalls: 1, toolFailures: 1 });
    const second = fx.fake.requests[1]!;
    const sentBack = second.messages.find((m) => m.role === "assistant")?.tool_calls as {
      function: { arguments: string };
    }[];
    expect(sentBack[0]?.function.arguments).toBe("{}");
    expect(second.messages.find((m) => m.role === "tool")?.content).toContain("not valid JSON");
  });

  it("refuses a call whose arguments are too large to send, keeping the server for the next calls", async () => {
    const big = "A".repeat(5 * 1024 * 1024);
    const { store, run } = await iterate([
      {
        toolCalls: [
          {
            name: "workspace__write_file",
            arguments: JSON.stringify({ path: "big.txt", content: big }),
          },
        ],
      },
      {
        toolCalls: [
          {
            name: "workspace__write_file",
            arguments: JSON.stringify({ path: "ok.txt", content: "ok" }),
          },
        ],
      },
      finish("x"),
    ]);
    const calls = store.toolCalls.filter((c) => c.runId === run.id);
    expect(calls.map((c) => [c.tool, c.isError])).toEqual([
      ["write_file", true],
      ["write_file", false],
    ]);
    expect(calls[0]?.result).toContain("more than the 4194304 a tool call may carry");
    // Stored as its size, not its megabytes.
    expect(JSON.stringify(calls[0]?.args)).toContain("bytes of arguments, not stored");
    expect(JSON.stringify(calls[0]?.args).length).toBeLessThan(200);
    expect(existsSync(join(fx.workspace, "big.txt"))).toBe(false);
    expect(readFileSync(join(fx.workspace, "ok.txt"), "utf8")).toBe("ok");
  });

  it("sends a command's coloured output to the model as text, stored as printed", async () => {
    const { store, run } = await iterate([
      {
        toolCalls: [
          {
            name: "workspace__run_command",
            arguments: JSON.stringify({
              command: "printf '\\033[31mFAIL\\033[0m cart\\n10%%\\r100%%\\n'",
            }),
          },
        ],
      },
      finish("x"),
    ]);
    const sent = String(fx.fake.requests[1]?.messages.find((m) => m.role === "tool")?.content);
    expect(sent).toContain("\nFAIL cart\n100%\n");
    expect(sent).not.toContain("\x1b");
    const stored = store.toolCalls.find((c) => c.runId === run.id)?.result;
    expect(stored).toContain("\x1b[31mFAIL\x1b[0m cart\n10%\r100%");
  });

  it("answers a finish with unparseable arguments with an error, so the model can call it again", async () => {
    const { store, run } = await iterate([
      {
        toolCalls: [{ name: "finish", arguments: '{"summary":"which file?" "status":"blocked"}' }],
      },
      finish("which file?", "blocked"),
    ]);
    expect(fx.fake.requests).toHaveLength(2);
    expect(String(fx.fake.requests[1]?.messages.at(-1)?.content)).toContain("not valid JSON");
    const calls = store.toolCalls.filter((c) => c.runId === run.id);
    expect(calls.map((c) => [c.tool, c.isError])).toEqual([["finish", true]]);
    // The second, valid finish is the one that ended the turn: blocked, with its question.
    expect(store.iterationsOf(run.id)[0]?.agent?.output).toContain("finish (blocked): which file?");
  });

  it("answers a finish without a status, or with another one, with an error naming it", async () => {
    const { store, run } = await iterate([
      { toolCalls: [{ name: "finish", arguments: { summary: "all finished" } }] },
      {
        toolCalls: [
          { name: "finish", arguments: { summary: "all finished", status: "completed" } },
        ],
      },
      finish("all finished"),
    ]);
    expect(fx.fake.requests).toHaveLength(3);
    for (const req of fx.fake.requests.slice(1)) {
      const answer = String(req.messages.at(-1)?.content);
      expect(answer).toMatch(/^finish: status: /);
      expect(answer).toContain('"status": "done" | "blocked"');
    }
    const calls = store.toolCalls.filter((c) => c.runId === run.id);
    expect(calls.map((c) => [c.tool, c.isError])).toEqual([
      ["finish", true],
      ["finish", true],
    ]);
    const it1 = store.iterationsOf(run.id)[0]!;
    expect(it1.agent?.exitCode).toBe(0);
    expect(it1.agent?.output).toContain("finish (done): all finished");
  });

  it("takes the completion promise from what the model says, not from a file its tools read", async () => {
    writeFileSync(
      join(fx.workspace, "NOTES.md"),
      "When done, the agent prints:\n<promise>DONE</promise>\n",
    );
    fx.fake.replies(
      { toolCalls: [{ name: "workspace__read_text_file", arguments: { path: "NOTES.md" } }] },
      finish("read the notes"),
      { content: "All done.\n<promise>DONE</promise>", toolCalls: [] },
    );
    const store = new MemoryRunStore();
    const run = fx.run({ testCommand: "true", completionPromise: "DONE", maxIterations: 2 });
    store.add(run);
    const res = resources(store, { llm: fx.llm });
    await runStep(res, run.id);
    const iterations = store.iterationsOf(run.id);
    expect(iterations.map((i) => i.outcome)).toEqual(["promise_missing", "complete"]);
    // The file's promise reached the transcript (the tool's result), and did not count.
    expect(iterations[0]?.agent?.output).toContain("<promise>DONE</promise>");
    expect((await store.getRun(run.id))?.status).toBe("succeeded");
  });
});
