import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runStep } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { describe, expect, it } from "vitest";
import { finish, type ReceivedRequest, type Reply } from "../../../tests/support/fake-mistral";
import { API_KEY, mistralFixture, toolResults } from "./mistral-fixture";
import { resources, waitFor } from "./support";

// Its tool servers and the secrets they are given: mistral-agent-servers.test.ts.

describe("the mistral agent (real SDK → fake Mistral, real MCP workspace server)", () => {
  const fx = mistralFixture();
  const { fake, run: mistralRun } = fx;

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
      finish("bug.txt now says fixed"),
    );
    const store = new MemoryRunStore();
    const run = mistralRun();
    store.add(run);
    const result = await runStep(resources(store, { llm: fx.llm }), run.id);

    expect(result).toMatchObject({ kind: "finished", status: "succeeded" });
    expect(readFileSync(join(fx.workspace, "bug.txt"), "utf8")).toBe("fixed\n");
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
    mkdirSync(join(fx.dir, "outside"));
    writeFileSync(join(fx.dir, "outside", "secret.txt"), "top secret");
    symlinkSync(join(fx.dir, "outside"), join(fx.workspace, "link"));
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
            arguments: { path: join(fx.dir, "outside", "secret.txt") },
          },
        ],
      },
      {
        toolCalls: [{ name: "workspace__read_text_file", arguments: { path: "link/secret.txt" } }],
      },
      finish("gave up", "blocked"),
    );
    const store = new MemoryRunStore();
    const run = mistralRun({ maxIterations: 1 });
    store.add(run);
    await runStep(resources(store, { llm: fx.llm }), run.id);

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
      if (i === 1) return finish("tried");
      if (i === 2)
        return {
          toolCalls: [
            { name: "workspace__write_file", arguments: { path: "bug.txt", content: "fixed" } },
          ],
        };
      return finish("fixed it");
    });
    const store = new MemoryRunStore();
    const run = mistralRun({ maxIterations: 3 });
    store.add(run);
    const result = await runStep(resources(store, { llm: fx.llm }), run.id);
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
      // A step the plan does not have: a failed call, answered so that the model can retry.
      { toolCalls: [{ name: "update_step", arguments: { step: 99, status: "done" } }] },
      { toolCalls: [{ name: "workspace__read_text_file", arguments: { path: "bug.txt" } }] },
      { toolCalls: [{ name: "update_step", arguments: { step: 1, status: "done" } }] },
      {
        toolCalls: [
          { name: "workspace__write_file", arguments: { path: "bug.txt", content: "fixed" } },
        ],
      },
      { toolCalls: [{ name: "update_step", arguments: { step: 2, status: "done" } }] },
      finish("done"),
    );
    const store = new MemoryRunStore();
    const run = mistralRun({ agent: { type: "mistral", plan: true } });
    store.add(run);
    const result = await runStep(resources(store, { llm: fx.llm }), run.id);
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
    // Valid updates are the plan's events; the invalid one is a failed call, stored and counted.
    expect(store.toolCalls.map((c) => [c.server, c.tool, c.isError])).toEqual([
      ["", "update_step", true],
      ["workspace", "read_text_file", false],
      ["workspace", "write_file", false],
    ]);
    expect(store.toolCalls[0]).toMatchObject({
      args: { step: 99, status: "done" },
      result: expect.stringContaining("invalid update_step"),
    });
    expect(stored.metrics).toMatchObject({ toolCalls: 3, toolFailures: 1 });
    // The default model came from the resources.
    expect(fake.requests[0]?.model).toBe("mistral-large-latest");
  });

  it("fails the run with phase_failed when the plan is invalid twice", async () => {
    fake.replies({ content: '{"steps": []}' });
    const store = new MemoryRunStore();
    const run = mistralRun({ agent: { type: "mistral", plan: true } });
    store.add(run);
    const result = await runStep(resources(store, { llm: fx.llm }), run.id);
    expect(result).toMatchObject({ kind: "finished", status: "failed", reason: "error" });
    expect(fake.requests).toHaveLength(2);
    const events = store.eventsOf(run.id);
    expect(events.find((e) => e.type === "phase_failed")?.data).toMatchObject({
      phase: "planning",
    });
    expect(
      events.some((e) => e.type === "validation_passed" || e.type === "validation_failed"),
    ).toBe(false);
    // The agent that started ended: its agent_finished comes before the phase's failure.
    expect(events.map((e) => e.type).slice(-4)).toEqual([
      "agent_started",
      "agent_finished",
      "phase_failed",
      "run_finished",
    ]);
    expect(events.find((e) => e.type === "agent_finished")?.data).toMatchObject({
      iteration: 1,
      exitCode: 1,
    });
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
      finish("ok"),
    );
    const store = new MemoryRunStore();
    const first = mistralRun({}, { sessionId: "s-history" });
    store.add(first);
    await runStep(resources(store, { llm: fx.llm }), first.id);
    fake.reset();
    fake.replies(finish("ok"));
    const second = mistralRun(
      { task: "Now delete the file from before" },
      { sessionId: "s-history" },
    );
    store.add(second);
    await runStep(resources(store, { llm: fx.llm }), second.id);
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
    const step = runStep(resources(store, { llm: fx.llm }), run.id, { stop: stop.signal });
    await waitFor(() => fake.requests.length > 0, "the model is called");
    stop.abort();
    const result = await step;
    expect(result).toMatchObject({ kind: "finished", status: "stopped", reason: "stopped" });
    const it1 = store.iterationsOf(run.id)[0];
    expect(it1?.outcome).toBe("stopped");
    // Killed, as a command agent is: no exit code, and no word of an unreachable model.
    expect(it1?.agent?.exitCode).toBeNull();
    expect(it1?.agent?.output).toContain("[looprun] killed: the run was stopped");
    expect(it1?.agent?.output).not.toContain("could not be reached");
    const finished = store.eventsOf(run.id).find((e) => e.type === "agent_finished");
    expect(finished?.data).toMatchObject({ iteration: 1, exitCode: null });
  });

  it("is killed by a stop during a tool call: no exit code, the model not called again", async () => {
    fake.replies({
      toolCalls: [{ name: "workspace__run_command", arguments: { command: "sleep 60" } }],
    });
    const store = new MemoryRunStore();
    const run = mistralRun();
    store.add(run);
    const stop = new AbortController();
    const step = runStep(resources(store, { llm: fx.llm }), run.id, { stop: stop.signal });
    await waitFor(
      () => store.eventsOf(run.id).some((e) => e.type === "agent_started"),
      "the agent to start",
    );
    await waitFor(() => fake.requests.length === 1, "the model is called");
    // The command runs (its call is in flight) when the stop comes.
    await new Promise((resolve) => setTimeout(resolve, 300));
    stop.abort();
    expect(await step).toMatchObject({ kind: "finished", status: "stopped", reason: "stopped" });
    expect(fake.requests).toHaveLength(1);
    const agent = store.iterationsOf(run.id)[0]?.agent;
    expect(agent?.exitCode).toBeNull();
    expect(agent?.output).toContain("run_command");
    expect(agent?.output).toContain("[looprun] killed: the run was stopped");
    expect(agent?.output).not.toContain("could not be reached");
    const finished = store.eventsOf(run.id).find((e) => e.type === "agent_finished");
    expect(finished?.data).toMatchObject({ iteration: 1, exitCode: null });
  });

  it("is killed at the run's deadline during a model call: no exit code, the run ends max_minutes", async () => {
    fake.replies({ hang: true });
    const store = new MemoryRunStore();
    // 2.4 s to the deadline: the workspace server has started well before it, even on a loaded
    // machine (a deadline during its start-up is mistral-agent-servers.test.ts's).
    const run = mistralRun({ maxMinutes: 0.04 });
    store.add(run);
    const result = await runStep(resources(store, { llm: fx.llm }), run.id);
    expect(result).toMatchObject({ kind: "finished", status: "failed", reason: "max_minutes" });
    expect(fake.requests).toHaveLength(1);
    const agent = store.iterationsOf(run.id)[0]?.agent;
    expect(agent?.exitCode).toBeNull();
    expect(agent?.output).toMatch(
      /\[looprun\] killed: the run's time budget \(maxMinutes\) ran out$/,
    );
    const finished = store.eventsOf(run.id).find((e) => e.type === "agent_finished");
    expect(finished?.data).toMatchObject({ iteration: 1, exitCode: null });
  });
});
