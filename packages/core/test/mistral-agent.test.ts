import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import {
  MistralChatModel,
  REDACTED,
  Redactor,
  runStep,
  workspaceServerLaunch,
} from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { FakeMistral, type ReceivedRequest, type Reply } from "../../../tests/support/fake-mistral";
import { makeRun, removeDir, resources, tempDir, waitFor } from "./support";

const API_KEY = "mistral-secret-key-0123456789";
/** The reference MCP server (stdio), as a run would add it. */
const SERVER_EVERYTHING = join(
  process.cwd(),
  "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
);

/** The tool result the fake received for the call it made in answer number `index`. */
function toolResults(req: ReceivedRequest): string[] {
  return req.messages.filter((m) => m.role === "tool").map((m) => String(m.content));
}

describe("the mistral agent (real SDK → fake Mistral, real MCP workspace server)", () => {
  const fake = new FakeMistral();
  let llm: MistralChatModel;
  let dir: string;
  let workspace: string;

  beforeAll(async () => {
    await fake.start();
    llm = new MistralChatModel({
      apiKey: API_KEY,
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

  const mistralRun = (extra: Record<string, unknown> = {}, opts: { sessionId?: string } = {}) =>
    makeRun(
      {
        task: "Fix bug.txt so that it says fixed",
        agent: { type: "mistral", model: "mistral-small-latest" },
        testCommand: "grep -q fixed bug.txt",
        cooldownMs: 0,
        ...extra,
      },
      workspace,
      opts,
    );

  it("reads and fixes the workspace through the workspace server, then calls finish", async () => {
    fake.replies(
      {
        content: "Let me look.",
        toolCalls: [{ name: "workspace__read_text_file", arguments: { path: "bug.txt" } }],
      },
      {
        toolCalls: [
          { name: "workspace__write_file", arguments: { path: "bug.txt", content: "fixed\n" } },
        ],
      },
      {
        toolCalls: [
          { name: "finish", arguments: { summary: "bug.txt now says fixed", status: "done" } },
        ],
      },
    );
    const store = new MemoryRunStore();
    const run = mistralRun();
    store.add(run);
    const result = await runStep(resources(store, { llm }), run.id);

    expect(result).toMatchObject({ kind: "finished", status: "succeeded" });
    expect(readFileSync(join(workspace, "bug.txt"), "utf8")).toBe("fixed\n");
    // The model saw the file's content as the result of its read.
    expect(toolResults(fake.requests[1] as ReceivedRequest)[0]).toContain("broken");
    // The model was offered the workspace tools and finish, under valid function names.
    const names = (fake.requests[0]?.tools ?? []).map((t) => t.function.name);
    expect(names).toEqual(
      expect.arrayContaining([
        "workspace__read_text_file",
        "workspace__write_file",
        "workspace__run_command",
        "finish",
      ]),
    );
    for (const t of fake.requests[0]?.tools ?? [])
      expect(JSON.stringify(t.function.parameters)).not.toContain("$schema");
    expect(fake.requests[0]?.model).toBe("mistral-small-latest");

    const calls = store.toolCalls.filter((c) => c.runId === run.id);
    expect(calls.map((c) => [c.seq, c.server, c.tool, c.isError])).toEqual([
      [1, "workspace", "read_text_file", false],
      [2, "workspace", "write_file", false],
    ]);
    const stored = (await store.getRun(run.id))!;
    expect(stored.metrics).toMatchObject({ toolCalls: 2, toolFailures: 0, tokens: 300 });
    const types = store.eventsOf(run.id).map((e) => e.type);
    expect(types.filter((t) => t === "tool_called")).toHaveLength(2);
    const it1 = store.iterationsOf(run.id)[0]!;
    expect(it1.agent?.exitCode).toBe(0);
    expect(it1.agent?.output).toContain("bug.txt now says fixed");
    expect(JSON.stringify({ runs: [...store.runs.values()], store })).not.toContain(API_KEY);
  });

  it("refuses reads outside the workspace as tool errors and ends the iteration after three in a row", async () => {
    mkdirSync(join(dir, "outside"));
    writeFileSync(join(dir, "outside", "secret.txt"), "top secret");
    symlinkSync(join(dir, "outside"), join(workspace, "link"));
    fake.replies(
      {
        toolCalls: [
          { name: "workspace__read_text_file", arguments: { path: "../outside/secret.txt" } },
        ],
      },
      {
        toolCalls: [
          {
            name: "workspace__read_text_file",
            arguments: { path: join(dir, "outside", "secret.txt") },
          },
        ],
      },
      {
        toolCalls: [{ name: "workspace__read_text_file", arguments: { path: "link/secret.txt" } }],
      },
      { toolCalls: [{ name: "finish", arguments: { summary: "gave up", status: "blocked" } }] },
    );
    const store = new MemoryRunStore();
    const run = mistralRun({ maxIterations: 1 });
    store.add(run);
    await runStep(resources(store, { llm }), run.id);

    const calls = store.toolCalls.filter((c) => c.runId === run.id);
    expect(calls).toHaveLength(3);
    for (const c of calls) {
      expect(c.isError).toBe(true);
      expect(c.result).not.toContain("top secret");
    }
    // Three failures in a row ended the turn: the fourth answer was never asked for.
    expect(fake.requests).toHaveLength(3);
    const it1 = store.iterationsOf(run.id)[0]!;
    expect(it1.agent?.exitCode).toBe(1);
    expect(it1.feedback).toContain("3 tool calls in a row failed");
    expect((await store.getRun(run.id))!.metrics).toMatchObject({ toolCalls: 3, toolFailures: 3 });
  });

  it("tells the next iteration which tool calls failed, and reports a missing argument without calling", async () => {
    fake.respond((_req, i): Reply => {
      if (i === 0)
        return { toolCalls: [{ name: "workspace__write_file", arguments: { path: "bug.txt" } }] };
      if (i === 1)
        return { toolCalls: [{ name: "finish", arguments: { summary: "tried", status: "done" } }] };
      if (i === 2)
        return {
          toolCalls: [
            { name: "workspace__write_file", arguments: { path: "bug.txt", content: "fixed" } },
          ],
        };
      return {
        toolCalls: [{ name: "finish", arguments: { summary: "fixed it", status: "done" } }],
      };
    });
    const store = new MemoryRunStore();
    const run = mistralRun({ maxIterations: 3 });
    store.add(run);
    const result = await runStep(resources(store, { llm }), run.id);
    expect(result).toMatchObject({ status: "succeeded" });
    const missing = store.toolCalls.find((c) => c.runId === run.id && c.seq === 1)!;
    expect(missing.isError).toBe(true);
    expect(missing.result).toContain("content");
    // Iteration 2's prompt names the failed call and the test output of iteration 1.
    const prompt2 = String(fake.requests[2]?.messages.find((m) => m.role === "user")?.content);
    expect(prompt2).toContain("Tool calls that failed so far");
    expect(prompt2).toContain("write_file");
    expect(prompt2).toContain("grep -q fixed bug.txt");
  });

  it("plans first: asks again after an invalid plan, tracks steps and emits plan events", async () => {
    const plan = { steps: [{ title: "Read bug.txt" }, { title: "Write the fix" }] };
    fake.replies(
      { content: "this is not json" },
      { content: JSON.stringify(plan) },
      { toolCalls: [{ name: "update_step", arguments: { step: 1, status: "in_progress" } }] },
      { toolCalls: [{ name: "workspace__read_text_file", arguments: { path: "bug.txt" } }] },
      { toolCalls: [{ name: "update_step", arguments: { step: 1, status: "done" } }] },
      {
        toolCalls: [
          { name: "workspace__write_file", arguments: { path: "bug.txt", content: "fixed" } },
        ],
      },
      { toolCalls: [{ name: "update_step", arguments: { step: 2, status: "done" } }] },
      { toolCalls: [{ name: "finish", arguments: { summary: "done", status: "done" } }] },
    );
    const store = new MemoryRunStore();
    const run = mistralRun({ agent: { type: "mistral", plan: true } });
    store.add(run);
    const result = await runStep(resources(store, { llm }), run.id);
    expect(result).toMatchObject({ status: "succeeded" });
    expect(fake.requests[0]?.response_format).toEqual({ type: "json_object" });
    expect(JSON.stringify(fake.requests[1]?.messages)).toContain("invalid");
    const types = store.eventsOf(run.id).map((e) => e.type);
    expect(types.filter((t) => t.startsWith("plan_") || t === "step_completed")).toEqual([
      "plan_created",
      "plan_updated",
      "step_completed",
      "step_completed",
    ]);
    const stored = (await store.getRun(run.id))!;
    expect(stored.plan?.steps.map((s) => s.status)).toEqual(["done", "done"]);
    // The default model came from the resources.
    expect(fake.requests[0]?.model).toBe("mistral-large-latest");
  });

  it("fails the run with phase_failed when the plan is invalid twice", async () => {
    fake.replies({ content: '{"steps": []}' });
    const store = new MemoryRunStore();
    const run = mistralRun({ agent: { type: "mistral", plan: true } });
    store.add(run);
    const result = await runStep(resources(store, { llm }), run.id);
    expect(result).toMatchObject({ kind: "finished", status: "failed", reason: "error" });
    expect(fake.requests).toHaveLength(2);
    const events = store.eventsOf(run.id);
    expect(events.find((e) => e.type === "phase_failed")?.data).toMatchObject({
      phase: "planning",
    });
    expect(
      events.some((e) => e.type === "validation_passed" || e.type === "validation_failed"),
    ).toBe(false);
  });

  it("ends the run with max_tokens when the token budget is spent", async () => {
    fake.replies({
      toolCalls: [{ name: "workspace__list_directory", arguments: { path: "." } }],
      tokens: 150,
    });
    const store = new MemoryRunStore();
    const run = mistralRun({ maxTokens: 400, maxIterations: 5 });
    store.add(run);
    const result = await runStep(resources(store, { llm }), run.id);
    expect(result).toMatchObject({ kind: "finished", status: "failed", reason: "max_tokens" });
    const stored = (await store.getRun(run.id))!;
    expect(stored.summary).toBe("failed_budget_exhausted");
    expect(stored.metrics.tokens).toBeGreaterThanOrEqual(400);
    expect(
      store
        .eventsOf(run.id)
        .some((e) => e.type === "budget_exhausted" && e.data.reason === "max_tokens"),
    ).toBe(true);
  });

  it("calls a tool of a reference MCP server the run adds (server-everything over stdio)", async () => {
    let offered: string[] = [];
    fake.respond((req, i): Reply => {
      if (i === 0) {
        offered = (req.tools ?? []).map((t) => t.function.name);
        const echo = offered.find((n) => n.startsWith("everything__") && n.includes("echo"));
        return {
          toolCalls: [
            { name: echo ?? "everything__echo", arguments: { message: "hello from the loop" } },
          ],
        };
      }
      if (i === 1)
        return {
          toolCalls: [
            { name: "workspace__write_file", arguments: { path: "bug.txt", content: "fixed" } },
          ],
        };
      return { toolCalls: [{ name: "finish", arguments: { summary: "ok", status: "done" } }] };
    });
    const store = new MemoryRunStore();
    const run = mistralRun({
      mcpServers: [
        { name: "everything", command: process.execPath, args: [SERVER_EVERYTHING, "stdio"] },
      ],
    });
    store.add(run);
    const result = await runStep(resources(store, { llm }), run.id);
    expect(result).toMatchObject({ status: "succeeded" });
    const echo = store.toolCalls.find((c) => c.runId === run.id && c.server === "everything")!;
    expect(echo.isError).toBe(false);
    expect(echo.result).toContain("hello from the loop");
    expect(offered.some((n) => n.startsWith("workspace__"))).toBe(true);
  });

  it("counts its tool servers' start-up in the agent's durationMs, as for a command agent", async () => {
    fake.replies(
      {
        toolCalls: [
          { name: "workspace__write_file", arguments: { path: "bug.txt", content: "fixed" } },
        ],
      },
      { toolCalls: [{ name: "finish", arguments: { summary: "ok", status: "done" } }] },
    );
    // A second workspace server that takes more than 2 s to start: the phase cannot be shorter
    // than that, however quick the model's answers are (counted from after the start-up, the
    // agent's own part is about 0.6 s here).
    const slow = workspaceServerLaunch(workspace, {});
    const store = new MemoryRunStore();
    const run = mistralRun({
      mcpServers: [
        {
          name: "slow",
          command: "/bin/sh",
          args: ["-c", 'sleep 2; exec "$@"', "sh", slow.command, ...slow.args],
        },
      ],
    });
    store.add(run);
    expect(await runStep(resources(store, { llm }), run.id)).toMatchObject({ status: "succeeded" });
    expect(store.iterationsOf(run.id)[0]?.agent?.durationMs).toBeGreaterThanOrEqual(2000);
  });

  it(`redacts what \${NAME} put into a server's secret variable wherever the server repeats it`, async () => {
    const pat = "pat-0123456789abcdefghij";
    const store = new MemoryRunStore();
    // A server that fails to start, saying its token on stderr (which the error quotes).
    const run = mistralRun({
      mcpServers: [
        {
          name: "gh",
          command: "/bin/sh",
          args: ["-c", 'echo "auth failed for $GITHUB_PERSONAL_ACCESS_TOKEN" >&2; exit 1'],
          env: { GITHUB_PERSONAL_ACCESS_TOKEN: `\${GH_PAT}` },
        },
      ],
    });
    store.add(run);
    // GH_PAT is allowed, but its name does not look secret: the workers' redactor does not
    // know its value.
    const res = resources(store, {
      llm,
      commandEnv: { ...process.env, GH_PAT: pat },
      envAllowlist: ["GH_PAT"],
      redactor: new Redactor([]),
    });
    expect(await runStep(res, run.id)).toMatchObject({ status: "failed" });
    const stored = JSON.stringify([
      store.runs.get(run.id),
      store.eventsOf(run.id),
      store.iterationsOf(run.id),
    ]);
    expect(stored).toContain(`auth failed for ${REDACTED}`);
    expect(stored).not.toContain(pat);
  });

  it("redacts the piece of a secret its capped transcript begins with", async () => {
    const secret = "transcript-secret-0123456789abcdefghij";
    const finishLine = "finish (done): ok";
    fake.replies({
      content: `${"x".repeat(100)}${secret}\n${"y".repeat(50)}`,
      toolCalls: [{ name: "finish", arguments: { summary: "ok", status: "done" } }],
    });
    const store = new MemoryRunStore();
    const run = mistralRun({ testCommand: "true" });
    store.add(run);
    // The cap keeps the transcript's last 20 characters of the secret, then the rest.
    const cap = 20 + 1 + 50 + 1 + finishLine.length;
    const res = resources(store, { llm, outputCapBytes: cap, redactor: new Redactor([secret]) });
    expect(await runStep(res, run.id)).toMatchObject({ status: "succeeded" });
    const output = store.iterationsOf(run.id)[0]?.agent?.output;
    expect(output).toBe(
      `[… earlier transcript omitted …]\n${REDACTED}\n${"y".repeat(50)}\n${finishLine}`,
    );
  });

  it(`redacts what \${NAME} put into a server from the log line of a step that failed`, async () => {
    const pat = "pat-9876543210zyxwvutsrq";
    fake.replies({ toolCalls: [{ name: "finish", arguments: { summary: "ok", status: "done" } }] });
    // A store that fails once the agent has finished, quoting the token (as a driver's error
    // might quote a value it was given).
    class FailingStore extends MemoryRunStore {
      override async commit(...args: Parameters<MemoryRunStore["commit"]>) {
        if (args[2].events?.some((e) => e.type === "agent_finished")) {
          throw new Error(`cannot write the row holding ${pat}`);
        }
        return super.commit(...args);
      }
    }
    const store = new FailingStore();
    const run = mistralRun({
      mcpServers: [
        {
          name: "everything",
          command: process.execPath,
          args: [SERVER_EVERYTHING, "stdio"],
          env: { GITHUB_PERSONAL_ACCESS_TOKEN: `\${GH_PAT}` },
        },
      ],
    });
    store.add(run);
    const logged: unknown[] = [];
    const logger = {
      info: () => {},
      warn: () => {},
      error: (obj: object, msg?: string) => logged.push({ obj, msg }),
    };
    const res = resources(store, {
      llm,
      logger,
      commandEnv: { ...process.env, GH_PAT: pat },
      envAllowlist: ["GH_PAT"],
      redactor: new Redactor([]),
    });
    expect(await runStep(res, run.id)).toMatchObject({ status: "failed", reason: "error" });
    expect(store.runs.get(run.id)?.summary).toBe(`error: cannot write the row holding ${REDACTED}`);
    const line = JSON.stringify(logged);
    expect(line).toContain("run step failed");
    expect(line).toContain(`cannot write the row holding ${REDACTED}`);
    expect(line).not.toContain(pat);
  });

  it(`puts \${NAME} into an MCP server's url and headers, and redacts their values from what is stored`, async () => {
    const tenant = "tenant-0123456789abcdef";
    const region = "region-fedcba9876543210";
    const asked: { url: string; region: string }[] = [];
    // A server that refuses everyone, saying which url and region it was asked for.
    const http = createServer((req, res) => {
      const said = { url: req.url ?? "", region: String(req.headers["x-region"]) };
      asked.push(said);
      res
        .writeHead(401, { "content-type": "text/plain" })
        .end(`unknown tenant in ${said.url} (region ${said.region})`);
    });
    await new Promise<void>((listening) => http.listen(0, "127.0.0.1", listening));
    try {
      const { port } = http.address() as AddressInfo;
      const store = new MemoryRunStore();
      const run = mistralRun({
        mcpServers: [
          {
            name: "remote",
            url: `http://127.0.0.1:${port}/mcp?tenant=\${MCP_TENANT}`,
            headers: { "X-Region": `\${MCP_REGION}` },
          },
        ],
      });
      store.add(run);
      expect(run.spec.mcpServers[0]).toMatchObject({ url: expect.stringContaining("MCP_TENANT") });
      // Neither name looks secret, and the workers' redactor knows neither value: what a
      // server's url or headers get is redacted because it went there.
      const res = resources(store, {
        llm,
        commandEnv: { ...process.env, MCP_TENANT: tenant, MCP_REGION: region },
        envAllowlist: ["MCP_TENANT", "MCP_REGION"],
        redactor: new Redactor([]),
      });
      expect(await runStep(res, run.id)).toMatchObject({ status: "failed" });
      expect(asked[0]).toEqual({ url: `/mcp?tenant=${tenant}`, region });
      const stored = JSON.stringify([store.runs.get(run.id), store.eventsOf(run.id)]);
      expect(stored).toContain(`unknown tenant in /mcp?tenant=${REDACTED} (region ${REDACTED})`);
      expect(stored).not.toContain(tenant);
      expect(stored).not.toContain(region);
    } finally {
      http.closeAllConnections();
      await new Promise((closed) => http.close(closed));
    }
  });

  it("gives the model the session's earlier runs and the files they touched", async () => {
    fake.replies(
      {
        toolCalls: [
          { name: "workspace__write_file", arguments: { path: "notes/todo.md", content: "fixed" } },
        ],
      },
      {
        toolCalls: [
          { name: "workspace__write_file", arguments: { path: "bug.txt", content: "fixed" } },
        ],
      },
      { toolCalls: [{ name: "finish", arguments: { summary: "ok", status: "done" } }] },
    );
    const store = new MemoryRunStore();
    const first = mistralRun({}, { sessionId: "s-history" });
    store.add(first);
    await runStep(resources(store, { llm }), first.id);
    fake.reset();
    fake.replies({ toolCalls: [{ name: "finish", arguments: { summary: "ok", status: "done" } }] });
    const second = mistralRun(
      { task: "Now delete the file from before" },
      { sessionId: "s-history" },
    );
    store.add(second);
    await runStep(resources(store, { llm }), second.id);
    const prompt = String(fake.requests[0]?.messages.find((m) => m.role === "user")?.content);
    expect(prompt).toContain("Earlier runs in this session");
    expect(prompt).toContain("Fix bug.txt so that it says fixed");
    expect(prompt).toContain("notes/todo.md");
  });

  it("aborts the LLM call in flight when the run is stopped", async () => {
    fake.replies({ hang: true });
    const store = new MemoryRunStore();
    const run = mistralRun();
    store.add(run);
    const stop = new AbortController();
    const step = runStep(resources(store, { llm }), run.id, { stop: stop.signal });
    await waitFor(() => fake.requests.length > 0, "the model is called");
    stop.abort();
    const result = await step;
    expect(result).toMatchObject({ kind: "finished", status: "stopped", reason: "stopped" });
    expect(store.iterationsOf(run.id)[0]?.outcome).toBe("stopped");
  });
});
