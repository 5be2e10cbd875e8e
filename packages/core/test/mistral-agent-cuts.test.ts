import { collectSecrets, Redactor, runStep } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { describe, expect, it } from "vitest";
import { finish } from "../../../tests/support/fake-mistral";
import { mistralFixture, toolResults } from "./mistral-fixture";
import { resources } from "./support";

// What the mistral agent's transcript (the iteration's agent output) keeps of long tool calls.

const SECRET = "npm_QWERTYUIOPASDFGHJKLZXCVBNM0123456789";
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

describe("the mistral agent's transcript cuts", () => {
  const fx = mistralFixture();

  /**
   * One iteration whose model runs `command` once, then finishes; the workers allow NPM_TOKEN
   * (SECRET), whose value their redactor knows.
   */
  async function runCommandWithToken(command: string) {
    const env = { ...process.env, NPM_TOKEN: SECRET };
    const redactor = new Redactor(collectSecrets(env, [], ["NPM_TOKEN"]));
    fx.fake.replies(
      { toolCalls: [{ name: "workspace__run_command", arguments: { command } }] },
      finish("x"),
    );
    const store = new MemoryRunStore();
    const run = fx.run({ testCommand: "false", maxIterations: 1 });
    store.add(run);
    await runStep(
      resources(store, { llm: fx.llm, redactor, commandEnv: env, envAllowlist: ["NPM_TOKEN"] }),
      run.id,
    );
    return { store, run };
  }

  it("leaves no piece of a secret where it cuts a tool's result, and says it cut", async () => {
    // 241 bytes of log, then the token: the transcript's 300-byte cut falls inside it.
    const { store, run } = await runCommandWithToken(
      "printf '%0240d\\n' 0; echo $NPM_TOKEN; printf '%0400d' 0; exit 1",
    );
    const it1 = store.iterationsOf(run.id)[0]!;
    const output = it1.agent?.output ?? "";
    expect(output).toContain("workspace__run_command");
    const stored = JSON.stringify({ its: store.iterationsOf(run.id), calls: store.toolCalls });
    expect(stored).not.toContain(SECRET.slice(0, 10));
    expect(stored).not.toContain(SECRET.slice(-10));
    // The cut is visible: a line says how much of the result the transcript left out.
    expect(output).toMatch(/\[… \d+ of \d+ bytes cut …\]/);
  });

  it("sends the model a tool's result without the secrets the workers know", async () => {
    // A command reads a secret (here its own variable; an agent might find the worker's own).
    await runCommandWithToken("echo token=$NPM_TOKEN");
    const results = toolResults(fx.fake.requests[1]!);
    expect(results).toHaveLength(1);
    expect(results[0]).toContain("token=[REDACTED]");
    expect(JSON.stringify(fx.fake.requests)).not.toContain(SECRET.slice(0, 10));
  });

  it("never cuts a character in half: no lone surrogate in the transcript", async () => {
    // Emoji (4 bytes, 2 UTF-16 units) from an odd offset: any byte or unit cap lands in one.
    const content = `x${"😀".repeat(150)}`;
    fx.fake.replies(
      { toolCalls: [{ name: "workspace__write_file", arguments: { path: "e.txt", content } }] },
      { toolCalls: [{ name: "workspace__read_text_file", arguments: { path: "e.txt" } }] },
      finish("done"),
    );
    const store = new MemoryRunStore();
    const run = fx.run({ testCommand: "true", maxIterations: 1 });
    store.add(run);
    await runStep(resources(store, { llm: fx.llm, outputCapBytes: 301 }), run.id);
    const output = store.iterationsOf(run.id)[0]?.agent?.output ?? "";
    expect(output).toContain("😀");
    expect(output).not.toMatch(LONE_SURROGATE);
  });
});
