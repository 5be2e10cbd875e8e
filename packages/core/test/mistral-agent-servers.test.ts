import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { REDACTED, Redactor, runStep, workspaceServerLaunch } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { describe, expect, it } from "vitest";
import { finish, type Reply } from "../../../tests/support/fake-mistral";
import { commandsOfRun } from "../../../tests/support/processes";
import { mistralFixture, SERVER_EVERYTHING } from "./mistral-fixture";
import { resources } from "./support";

describe("the mistral agent's tool servers and the secrets they are given (real SDK → fake Mistral, real MCP servers)", () => {
  const fx = mistralFixture();
  const { fake, run: mistralRun } = fx;

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
      return finish("ok");
    });
    const store = new MemoryRunStore();
    const run = mistralRun({
      mcpServers: [
        { name: "everything", command: process.execPath, args: [SERVER_EVERYTHING, "stdio"] },
      ],
    });
    store.add(run);
    const result = await runStep(resources(store, { llm: fx.llm }), run.id);
    expect(result).toMatchObject({ status: "succeeded" });
    const echo = store.toolCalls.find((c) => c.runId === run.id && c.server === "everything")!;
    expect(echo.isError).toBe(false);
    expect(echo.result).toContain("hello from the loop");
    expect(offered.some((n) => n.startsWith("workspace__"))).toBe(true);
  });

  it("marks the stdio servers a run adds with its LOOPRUN_RUN_ID, as a crashed worker's resumer looks for", async () => {
    // A worker killed with -9 leaves a server that does not exit on its own (a timer, a pool)
    // running; the next step of the run kills every process carrying the run's id.
    const run = mistralRun({
      mcpServers: [
        { name: "everything", command: process.execPath, args: [SERVER_EVERYTHING, "stdio"] },
      ],
    });
    let marked: string[] = [];
    fake.respond((_req, i): Reply => {
      if (i === 0)
        marked = commandsOfRun(run.id).filter((cmd) => cmd.includes("server-everything"));
      return finish("ok");
    });
    const store = new MemoryRunStore();
    store.add(run);
    await runStep(resources(store, { llm: fx.llm }), run.id);
    expect(marked.length).toBe(1);
  });

  it("counts its tool servers' start-up in the agent's durationMs, as for a command agent", async () => {
    fake.replies(
      {
        toolCalls: [
          { name: "workspace__write_file", arguments: { path: "bug.txt", content: "fixed" } },
        ],
      },
      finish("ok"),
    );
    // A second workspace server that takes more than 2 s to start: the phase cannot be shorter
    // than that, however quick the model's answers are (counted from after the start-up, the
    // agent's own part is about 0.6 s here).
    const slow = workspaceServerLaunch(fx.workspace, {});
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
    expect(await runStep(resources(store, { llm: fx.llm }), run.id)).toMatchObject({
      status: "succeeded",
    });
    expect(store.iterationsOf(run.id)[0]?.agent?.durationMs).toBeGreaterThanOrEqual(2000);
  });

  it("is killed, not failed, when the run's deadline comes while its tool servers start", async () => {
    const store = new MemoryRunStore();
    // 0.6 s to the deadline; a server that never answers its start-up.
    const run = mistralRun({
      maxMinutes: 0.01,
      mcpServers: [{ name: "never", command: "/bin/sh", args: ["-c", "sleep 60"] }],
    });
    store.add(run);
    expect(await runStep(resources(store, { llm: fx.llm }), run.id)).toMatchObject({
      status: "failed",
      reason: "max_minutes",
    });
    const agent = store.iterationsOf(run.id)[0]?.agent;
    expect(agent?.exitCode).toBeNull();
    expect(agent?.output).toBe(
      "[looprun] killed: the run's time budget (maxMinutes) ran out (its tool servers were starting)",
    );
    const events = store.eventsOf(run.id);
    expect(events.find((e) => e.type === "agent_finished")?.data).toMatchObject({
      iteration: 1,
      exitCode: null,
    });
    // A killed agent, as one cut during a model call: no failed phase.
    expect(events.filter((e) => e.type === "phase_failed")).toEqual([]);
    expect(fx.fake.requests).toHaveLength(0);
  });

  it(`fails the run, naming it, when \${NAME} names no variable the workers allow`, async () => {
    const store = new MemoryRunStore();
    const run = mistralRun({
      mcpServers: [
        {
          name: "gh",
          command: "/bin/sh",
          args: ["-c", "sleep 60"],
          env: { GITHUB_TOKEN: `\${MISTRAL_API_KEY}`, OTHER: `\${GH_PAT}` },
        },
      ],
    });
    store.add(run);
    const res = resources(store, {
      llm: fx.llm,
      commandEnv: { ...process.env, GH_PAT: "allowed-value", MISTRAL_API_KEY: "not-allowed" },
      envAllowlist: ["GH_PAT"],
    });
    expect(await runStep(res, run.id)).toMatchObject({ status: "failed", reason: "error" });
    expect(store.runs.get(run.id)?.summary).toBe(
      `phase_failed: implementation: MCP servers could not start: \${MISTRAL_API_KEY} names no variable of the workers (unset, or not in AGENT_ENV_ALLOWLIST)`,
    );
    // The model was never asked: the run failed before its servers started.
    expect(fx.fake.requests).toHaveLength(0);
  });

  // The variables' values are the workers' (allowed, but their names do not look secret: the
  // workers' redactor does not know them); the run's server variable may look secret or not.
  it.each([
    ["GITHUB_PERSONAL_ACCESS_TOKEN", "GH_PAT", "pat-0123456789abcdefghij"],
    ["GH", "GITHUB_AUTH", "ghauth-val-3210987"],
  ])(
    `redacts what \${NAME} put into a server's %s (from %s) wherever the server repeats it`,
    async (variable, name, value) => {
      const store = new MemoryRunStore();
      // A server that fails to start, saying its token on stderr (which the error quotes).
      const run = mistralRun({
        mcpServers: [
          {
            name: "gh",
            command: "/bin/sh",
            args: ["-c", `echo "auth failed for $${variable}" >&2; exit 1`],
            env: { [variable]: `\${${name}}` },
          },
        ],
      });
      store.add(run);
      const res = resources(store, {
        llm: fx.llm,
        commandEnv: { ...process.env, [name]: value },
        envAllowlist: [name],
        redactor: new Redactor([]),
      });
      expect(await runStep(res, run.id)).toMatchObject({ status: "failed" });
      const stored = JSON.stringify([
        store.runs.get(run.id),
        store.eventsOf(run.id),
        store.iterationsOf(run.id),
      ]);
      expect(stored).toContain(`auth failed for ${REDACTED}`);
      expect(stored).not.toContain(value);
    },
  );

  it(`leaves what \${NAME} took from the variables every command gets (HOME, LOOPRUN_*) as they are`, async () => {
    const home = "/home/some-user-home";
    const store = new MemoryRunStore();
    const run = mistralRun({
      mcpServers: [
        {
          name: "gh",
          command: "/bin/sh",
          args: ["-c", 'echo "no config in $H/.config (run $R)" >&2; exit 1'],
          env: { H: `\${HOME}`, R: `\${LOOPRUN_RUN_ID}` },
        },
      ],
    });
    store.add(run);
    const res = resources(store, {
      llm: fx.llm,
      commandEnv: { ...process.env, HOME: home },
      redactor: new Redactor([]),
    });
    expect(await runStep(res, run.id)).toMatchObject({ status: "failed" });
    expect((await store.getRun(run.id))?.summary).toContain(
      `no config in ${home}/.config (run ${run.id})`,
    );
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
    // The cap would keep the transcript's last 20 characters of the secret, then the rest:
    // the transcript is redacted before it is cut, so it keeps the redaction and 10 x's.
    const cap = 20 + 1 + 50 + 1 + finishLine.length;
    const res = resources(store, {
      llm: fx.llm,
      outputCapBytes: cap,
      redactor: new Redactor([secret]),
    });
    expect(await runStep(res, run.id)).toMatchObject({ status: "succeeded" });
    const output = store.iterationsOf(run.id)[0]?.agent?.output;
    expect(output).toBe(
      `[… 90 bytes of earlier transcript omitted …]\n${"x".repeat(10)}${REDACTED}\n${"y".repeat(50)}\n${finishLine}`,
    );
  });

  it(`redacts what \${NAME} put into a server from the log line of a step that failed`, async () => {
    const pat = "pat-9876543210zyxwvutsrq";
    fake.replies(finish("ok"));
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
      llm: fx.llm,
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
        llm: fx.llm,
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
});
