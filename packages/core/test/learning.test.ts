import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  argumentShape,
  buildPrompt,
  type FailurePattern,
  MistralChatModel,
  observationsOf,
  promptCandidates,
  renderLearnedPatterns,
  runStep,
  toolCallShape,
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

describe("argumentShape", () => {
  it("names keys (sorted) and value types, never values", () => {
    expect(argumentShape({ path: "secret.txt", content: "hunter2" })).toBe(
      "{content:string,path:string}",
    );
    expect(argumentShape({ command: "ls", timeoutMs: 10, opts: { a: 1 }, list: [1, "x"] })).toBe(
      "{command:string,list:array,opts:object,timeoutMs:number}",
    );
    // A top-level array shows its element types; nested values only their kind.
    expect(argumentShape([{ a: 1 }, "x"])).toBe("object|string[]");
    expect(argumentShape(undefined)).toBe("undefined");
    expect(argumentShape({})).toBe("{}");
  });
});

const pattern = (p: Partial<FailurePattern>): FailurePattern => ({
  scope: "tool",
  workspace: "/ws",
  subject: "workspace.run_command",
  shape: "{command:string}",
  successes: 0,
  failures: 0,
  totalDurationMs: 0,
  lastErrors: [],
  lastRunId: null,
  lastSeenAt: 0,
  ...p,
});

describe("renderLearnedPatterns", () => {
  it("tells what failed (worst first, by the names the model calls) and what worked", () => {
    const text = renderLearnedPatterns([
      pattern({
        subject: "workspace.write_file",
        shape: "{content:string,path:string}",
        successes: 9,
        totalDurationMs: 45,
      }),
      pattern({
        shape: "$ yarn test",
        failures: 3,
        lastErrors: ["exit code 127: yarn: not found"],
      }),
      pattern({
        scope: "command",
        subject: "npm test",
        shape: "",
        failures: 4,
        lastErrors: ["exit 1: 2 failing\n  cart"],
      }),
      pattern({
        subject: "workspace.edit_file",
        shape: "{edits:array,path:string} ! oldText not found in <path>",
        failures: 2,
        lastErrors: ["oldText not found in a.ts"],
      }),
      pattern({ subject: "workspace.edit_file", shape: "{edits:array,path:string}", successes: 1 }),
    ]);
    expect(text).toBe(
      [
        "These approaches failed before in this workspace (do not repeat them as they were; change the approach):",
        "- command `npm test`: failed 4 of 4 times; last error: exit 1: 2 failing cart",
        "- tool `workspace__run_command` with command `yarn test`: failed 3 of 3 times; last error: exit code 127: yarn: not found",
        '- tool `workspace__edit_file` with {edits:array,path:string} failing with "oldText not found in <path>": failed 2 of 3 times; last error: oldText not found in a.ts',
        "These worked before (prefer them):",
        "- tool `workspace__write_file` with {content:string,path:string}: succeeded 9 of 9 times (mean 5 ms)",
      ].join("\n"),
    );
  });

  it("advises only against real patterns: twice or more, and at least half the calls", () => {
    const text = renderLearnedPatterns([
      // A tool that failed 1 time in 200 (rows from before error kinds: failures in the shape's row).
      pattern({
        subject: "workspace.read_text_file",
        shape: "{path:string}",
        successes: 199,
        failures: 1,
      }),
      // A missing file, 3 times in 40 reads.
      pattern({
        subject: "workspace.read_text_file",
        shape: "{path:string} ! no such file or directory: <path>",
        failures: 3,
      }),
      // One failure is an incident.
      pattern({ shape: "$ make", failures: 1 }),
      // Tests run before and after a fix: fail, pass — a working command.
      pattern({ shape: "$ npm test", failures: 3, successes: 3 }),
      // run_command keyed by its argument shape (rows from before): no advice either way.
      pattern({ shape: "{command:string}", failures: 9, successes: 1 }),
    ]);
    expect(text).toBe(
      [
        "These worked before (prefer them):",
        "- tool `workspace__read_text_file` with {path:string}: succeeded 199 of 203 times (mean 0 ms)",
      ].join("\n"),
    );
  });

  it("tells the run's own checks apart: a goal to meet, not an approach to drop", () => {
    const patterns = [
      pattern({ scope: "command", subject: "npm test", shape: "", failures: 4 }),
      pattern({ scope: "command", subject: "npm run lint", shape: "", failures: 5 }),
      // The agent running the gate itself, before its fix: no advice against testing.
      pattern({ shape: "$ npm test", failures: 4, lastErrors: ["exit 1"] }),
      pattern({ shape: "$ yarn test", failures: 3 }),
    ];
    expect(renderLearnedPatterns(patterns, ["npm test"])).toBe(
      [
        "These approaches failed before in this workspace (do not repeat them as they were; change the approach):",
        "- command `npm run lint`: failed 5 of 5 times",
        "- tool `workspace__run_command` with command `yarn test`: failed 3 of 3 times",
        "Checks of this task that kept failing in this workspace (they must pass: what was tried did not make them, so change how you meet them):",
        "- command `npm test`: failed 4 of 4 times",
      ].join("\n"),
    );
    // The prompt passes the run's validation commands.
    const { spec } = makeRun({ task: "t", testCommand: "npm test" }, "/ws");
    const prompt = buildPrompt({ spec, iteration: 1, feedback: null, learned: patterns });
    expect(prompt).toContain("Checks of this task that kept failing");
    expect(prompt).not.toContain("with command `npm test`");
  });

  it("has nothing to say without patterns", () => {
    expect(renderLearnedPatterns([])).toBeNull();
  });

  it("weighs a tool's failures against its successes however long its argument shape", () => {
    for (const names of [10, 20, 25, 200]) {
      const args = Object.fromEntries(
        Array.from({ length: names }, (_, i) => [
          `argument_name_${String(i).padStart(3, "0")}`,
          "x",
        ]),
      );
      const call = (isError: boolean) => ({
        iteration: 1,
        server: "files",
        tool: "write",
        args,
        isError,
        result: isError ? "permission denied while writing the file" : "ok",
        durationMs: 1,
      });
      const [ok] = observationsOf({ toolCalls: [call(false)] });
      const [bad] = observationsOf({ toolCalls: [call(true)] });
      expect(Buffer.byteLength(ok?.shape ?? "")).toBeLessThanOrEqual(400);
      // The failure's row names the successes' shape, then its error kind.
      expect(bad?.shape.startsWith(`${ok?.shape} ! permission denied`), String(names)).toBe(true);
      const text = renderLearnedPatterns([
        pattern({ subject: ok?.subject, shape: ok?.shape, successes: 100 }),
        pattern({ subject: bad?.subject, shape: bad?.shape, failures: 2, lastErrors: ["denied"] }),
      ]);
      expect(text, String(names)).not.toContain("failed before");
      expect(text, String(names)).toContain("succeeded 100 of 102 times");
    }
  });

  it("knows a long gate command by the cut key its pattern holds", () => {
    const long = `npm test -- ${"spec/ünïcode-".repeat(60)}`;
    const [observed] = observationsOf({
      updateIteration: {
        n: 1,
        attempt: 1,
        patch: {
          status: "failed",
          validation: [{ command: long, exitCode: 1, durationMs: 1, output: "" }],
        },
      },
    });
    expect(observed?.subject).not.toBe(long);
    expect(Buffer.byteLength(observed?.subject ?? "")).toBeLessThanOrEqual(400);
    expect(observed?.subject).toMatch(/^npm test -- spec\/ünïcode-.*…#[0-9a-f]{12}$/);
    const patterns = [
      pattern({ scope: "command", subject: observed?.subject, shape: "", failures: 2 }),
    ];
    expect(renderLearnedPatterns(patterns, [long])).toContain(
      "Checks of this task that kept failing in this workspace",
    );
  });
});

describe("the prompt names tools as the model calls them", () => {
  it("in the tool calls that failed so far and in what was learned", () => {
    const { spec } = makeRun(
      { task: "t", agent: { type: "mistral", model: "m" }, testCommand: "true" },
      "/ws",
    );
    const text = buildPrompt({
      spec,
      iteration: 2,
      feedback: null,
      toolFailures: [
        {
          iteration: 1,
          server: "workspace",
          tool: "read_text_file",
          args: { path: "x" },
          error: "no such file or directory: x",
        },
        { iteration: 1, server: "", tool: "cat", args: {}, error: 'unknown tool "cat"' },
      ],
      learned: [pattern({ shape: "$ yarn test", failures: 2 })],
    });
    expect(text).toContain(
      '- iteration 1: workspace__read_text_file({"path":"x"}) failed: no such file or directory: x\n- iteration 1: cat({}) failed',
    );
    expect(text).toContain(
      "- tool `workspace__run_command` with command `yarn test`: failed 2 of 2",
    );
  });
});

describe("toolCallShape", () => {
  const call = (tool: string, args: unknown, isError = false, result = "ok") => ({
    server: "workspace",
    tool,
    args,
    isError,
    result,
  });
  it("keys run_command by its command, other failures by shape and error kind", () => {
    expect(toolCallShape(call("run_command", { command: "  npm   test " }, true))).toBe(
      "$ npm test",
    );
    expect(toolCallShape(call("read_text_file", { path: "src/a.ts" }))).toBe("{path:string}");
    expect(
      toolCallShape(
        call("read_text_file", { path: "src/a.ts" }, true, "no such file or directory: src/a.ts"),
      ),
    ).toBe("{path:string} ! no such file or directory: <path>");
    expect(
      toolCallShape(
        call("read_text_file", { path: "big.log" }, true, "file is 20971520 bytes\nmore"),
      ),
    ).toBe("{path:string} ! file is N bytes");
    // Another server's run_command is just a tool.
    expect(toolCallShape({ ...call("run_command", { command: "ls" }), server: "other" })).toBe(
      "{command:string}",
    );
  });
});

describe("promptCandidates", () => {
  it("chooses what worked apart from what failed most", () => {
    const failing = Array.from({ length: 60 }, (_, i) =>
      pattern({ shape: `$ false ${i}`, failures: 2 + i }),
    );
    const worked = pattern({
      subject: "workspace.list_directory",
      shape: "{path:string}",
      successes: 5,
    });
    const chosen = promptCandidates([worked, ...failing], 50);
    expect(chosen).toHaveLength(51);
    expect(chosen).toContain(worked);
    expect(renderLearnedPatterns(chosen)).toContain(
      "These worked before (prefer them):\n- tool `workspace__list_directory` with {path:string}: succeeded 5 of 5 times",
    );
  });
});

const userText = (req: ReceivedRequest | undefined) =>
  (req?.messages ?? [])
    .filter((m) => m.role === "user")
    .map((m) => String(m.content))
    .join("\n");

describe("learning across runs (real SDK → fake Mistral)", () => {
  const fake = new FakeMistral();
  let llm: MistralChatModel;
  let dir: string;
  let workspace: string;

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
    dir = await tempDir();
    workspace = join(dir, "ws");
    mkdirSync(workspace);
    writeFileSync(join(workspace, "bug.txt"), "broken\n");
    return () => removeDir(dir);
  });

  it("tells the next run (agent and planner) what really failed, not the tools of an ordinary run", async () => {
    const store = new MemoryRunStore();
    const call = (name: string, args: unknown): Reply => ({
      toolCalls: [{ name: `workspace__${name}`, arguments: args }],
    });
    const FIX = call("write_file", { path: "bug.txt", content: "fixed\n" });
    const DONE: Reply = finish("ok");
    // Run 1, an ordinary session: a file that is not there, the right one, the check failing
    // before the fix and passing after it; and a command that cannot work, twice.
    fake.replies(
      call("read_text_file", { path: "README.md" }),
      call("read_text_file", { path: "bug.txt" }),
      call("run_command", { command: "grep -q fixed bug.txt" }),
      call("run_command", { command: "yarn test" }),
      FIX,
      call("run_command", { command: "yarn test" }),
      call("run_command", { command: "grep -q fixed bug.txt" }),
      DONE,
    );
    const first = makeRun(
      {
        task: "Fix bug.txt",
        agent: { type: "mistral", model: "mistral-small-latest" },
        testCommand: "grep -q fixed bug.txt",
        cooldownMs: 0,
      },
      workspace,
    );
    store.add(first);
    const res = resources(store, { llm });
    expect(await runStep(res, first.id)).toMatchObject({ kind: "finished", status: "succeeded" });
    expect(userText(fake.requests[0])).not.toContain("Learned from earlier runs");

    // Run 2 in the same workspace plans first: the planner and the agent both learn.
    writeFileSync(join(workspace, "bug.txt"), "broken again\n");
    fake.reset();
    fake.replies(
      { content: JSON.stringify({ steps: [{ title: "Write fixed into bug.txt" }] }) },
      FIX,
      DONE,
    );
    const second = makeRun(
      {
        task: "Fix bug.txt again",
        agent: { type: "mistral", model: "mistral-small-latest", plan: true },
        testCommand: "grep -q fixed bug.txt",
        cooldownMs: 0,
      },
      workspace,
    );
    store.add(second);
    expect(await runStep(res, second.id)).toMatchObject({ kind: "finished", status: "succeeded" });
    const planning = userText(fake.requests[0]);
    const acting = userText(fake.requests[1]);
    for (const text of [planning, acting]) {
      const learned = text
        .slice(text.indexOf("# Learned from earlier runs"))
        .replace(/\d+ ms/g, "N ms")
        .split("\n\n")[1]
        ?.split("\n");
      expect(learned).toEqual([
        "These approaches failed before in this workspace (do not repeat them as they were; change the approach):",
        expect.stringMatching(
          /^- tool `workspace__run_command` with command `yarn test`: failed 2 of 2 times; last error: exit code 127 \(N ms\) .*yarn: not found$/,
        ),
        "These worked before (prefer them):",
        "- tool `workspace__write_file` with {content:string,path:string}: succeeded 1 of 1 times (mean N ms)",
      ]);
    }
    // The iteration's stored prompt holds it as well.
    expect(store.iterationsOf(second.id)[0]?.prompt).toContain("# Learned from earlier runs");
  });
});
