import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  argumentShape,
  type FailurePattern,
  MistralChatModel,
  renderLearnedPatterns,
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
  it("tells what failed (worst first, with the last error) and what worked", () => {
    const text = renderLearnedPatterns([
      pattern({
        subject: "workspace.write_file",
        shape: "{content:string,path:string}",
        successes: 9,
        totalDurationMs: 45,
      }),
      pattern({ failures: 1, successes: 3, lastErrors: ["exit 127"] }),
      pattern({
        scope: "command",
        subject: "npm test",
        shape: "",
        failures: 4,
        lastErrors: ["exit 1: 2 failing\n  cart"],
      }),
    ]);
    expect(text).toBe(
      [
        "These approaches failed before in this workspace (do not repeat them as they were; change the approach):",
        "- command `npm test`: failed 4 of 4 times; last error: exit 1: 2 failing cart",
        "- tool `workspace.run_command` with {command:string}: failed 1 of 4 times; last error: exit 127",
        "These worked before (prefer them):",
        "- tool `workspace.write_file` with {content:string,path:string}: succeeded 9 of 9 times (mean 5 ms)",
      ].join("\n"),
    );
  });

  it("has nothing to say without patterns", () => {
    expect(renderLearnedPatterns([])).toBeNull();
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

  it("gives the next run in the workspace what failed and what worked before, and the planner too", async () => {
    const store = new MemoryRunStore();
    const READ_MISSING: Reply = {
      toolCalls: [{ name: "workspace__read_text_file", arguments: { path: "missing.txt" } }],
    };
    const FIX: Reply = {
      toolCalls: [
        { name: "workspace__write_file", arguments: { path: "bug.txt", content: "fixed\n" } },
      ],
    };
    const DONE: Reply = finish("ok");
    // Run 1: a tool call that fails, a failing check, then the fix.
    fake.replies(READ_MISSING, DONE, FIX, DONE);
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
      expect(text).toContain("# Learned from earlier runs");
      expect(text).toMatch(
        /- tool `workspace\.read_text_file` with \{path:string\}: failed 1 of 1 times; last error: .*missing\.txt/,
      );
      expect(text).toContain(
        "- command `grep -q fixed bug.txt`: failed 1 of 2 times; last error: exit 1",
      );
      expect(text).toContain(
        "These worked before (prefer them):\n- tool `workspace.write_file` with {content:string,path:string}: succeeded 1 of 1 times",
      );
    }
    // The iteration's stored prompt holds it as well.
    expect(store.iterationsOf(second.id)[0]?.prompt).toContain("# Learned from earlier runs");
  });
});
