import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { FakeMistral, finish, type ReceivedRequest, type Reply } from "./support/fake-mistral";
import { getIterations, type Stack, startStack, submit, waitForStatus } from "./support/stack";

const fake = new FakeMistral();
let stack: Stack;

beforeAll(async () => {
  await fake.start();
  stack = await startStack({
    redisUrl: inject("redisUrl"),
    env: { MISTRAL_API_KEY: "learning-e2e-key-0123456789", MISTRAL_SERVER_URL: fake.url },
  });
});
afterAll(async () => {
  await stack?.stop();
  await fake.stop();
});

const userText = (req: ReceivedRequest | undefined) =>
  (req?.messages ?? [])
    .filter((m) => m.role === "user")
    .map((m) => String(m.content))
    .join("\n");

const READ_MISSING: Reply = {
  toolCalls: [{ name: "workspace__read_text_file", arguments: { path: "missing.txt" } }],
};
const FIX: Reply = {
  toolCalls: [
    { name: "workspace__write_file", arguments: { path: "bug.txt", content: "fixed\n" } },
  ],
};
const DONE: Reply = finish("ok");

describe("learning across runs (API, worker, SQLite, the real SDK → fake Mistral)", () => {
  it("the next run's planner and agent are told what failed and what worked; /api/stats/tools lists it", async () => {
    const workspace = join(stack.workspacesRoot, "learn");
    mkdirSync(workspace);
    writeFileSync(join(workspace, "bug.txt"), "broken\n");
    const body = (task: string, plan: boolean) => ({
      task,
      workspace: "learn",
      agent: { type: "mistral", model: "mistral-small-latest", plan },
      testCommand: "grep -q fixed bug.txt",
      cooldownMs: 0,
    });

    // Run 1: a missing file read twice and a check that fails (iteration 1), then the fix.
    fake.replies(READ_MISSING, READ_MISSING, DONE, FIX, DONE);
    const first = await submit(stack, { ...body("Fix bug.txt", false), sessionId: "learn-1" });
    expect(await waitForStatus(stack, first.id)).toMatchObject({
      status: "succeeded",
      iteration: 2,
    });
    expect(fake.requests).toHaveLength(5);
    expect(userText(fake.requests[0])).not.toContain("Learned from earlier runs");

    // Run 2, another session in the same workspace, plans first.
    writeFileSync(join(workspace, "bug.txt"), "broken again\n");
    fake.reset();
    fake.replies(
      { content: JSON.stringify({ steps: [{ title: "Write fixed into bug.txt" }] }) },
      FIX,
      DONE,
    );
    const second = await submit(stack, {
      ...body("Fix bug.txt again", true),
      sessionId: "learn-2",
    });
    expect((await waitForStatus(stack, second.id)).status).toBe("succeeded");
    expect(fake.requests).toHaveLength(3);
    const [planner, agent] = [userText(fake.requests[0]), userText(fake.requests[1])];
    // The planner's request asks for a JSON plan; the agent's offers the tools.
    expect(fake.requests[0]?.tools ?? []).toEqual([]);
    expect(fake.requests[1]?.tools?.map((t) => t.function.name)).toContain("finish");
    for (const [who, text] of [
      ["planner", planner],
      ["agent", agent],
    ]) {
      expect(text, who).toContain("# Learned from earlier runs");
      expect(text, who).toContain(
        "These approaches failed before in this workspace (do not repeat them as they were; change the approach):",
      );
      // By the name the model calls; the failure weighed against the tool's calls, by kind.
      expect(text, who).toMatch(
        /- tool `workspace__read_text_file` with \{path:string\} failing with "no such file or directory: <path>": failed 2 of 2 times; last error: .*missing\.txt/,
      );
      // One failure of the check (before the fix) is not a pattern.
      expect(text, who).not.toContain("command `grep -q fixed bug.txt`");
      expect(text, who).toMatch(
        /These worked before \(prefer them\):\n- tool `workspace__write_file` with \{content:string,path:string\}: succeeded 1 of 1 times \(mean \d+ ms\)/,
      );
    }
    const [iteration] = await getIterations(stack, second.id);
    expect(iteration?.prompt).toContain("# Learned from earlier runs");

    // The same record, at the API: both runs folded in (run 2's write and check included).
    const stats = await stack.api("GET", "/api/stats/tools?workspace=learn");
    expect(stats.status).toBe(200);
    const patterns = stats.body.patterns as {
      scope: string;
      subject: string;
      shape: string;
      successes: number;
      failures: number;
      lastErrors: string[];
      lastRunId: string;
      workspace: string;
    }[];
    const find = (subject: string) => patterns.find((p) => p.subject === subject);
    expect(find("grep -q fixed bug.txt")).toMatchObject({
      scope: "command",
      workspace,
      successes: 2,
      failures: 1,
      lastRunId: second.id,
    });
    expect(find("workspace.read_text_file")).toMatchObject({
      scope: "tool",
      shape: "{path:string} ! no such file or directory: <path>",
      successes: 0,
      failures: 2,
      lastErrors: [expect.stringContaining("missing.txt"), expect.stringContaining("missing.txt")],
      lastRunId: first.id,
    });
    expect(find("workspace.write_file")).toMatchObject({
      scope: "tool",
      shape: "{content:string,path:string}",
      successes: 2,
      failures: 0,
    });
  });
});
