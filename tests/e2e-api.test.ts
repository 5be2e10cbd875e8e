import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, inject, it } from "vitest";
import {
  commandRun,
  getEvents,
  type RunView,
  submit,
  useStack,
  waitForStatus,
} from "./support/stack";

const stack = useStack(() => ({ redisUrl: inject("redisUrl") }));

const unique = (name: string) => `${name}-${randomBytes(4).toString("hex")}`;

interface Page {
  items: RunView[];
  nextCursor: string | null;
}

async function allRunIds(): Promise<string[]> {
  const res = await stack.api<Page>("GET", "/api/runs?limit=100");
  expect(res.status).toBe(200);
  expect(res.body.nextCursor).toBeNull();
  return res.body.items.map((r) => r.id);
}

describe("POST /api/runs with a bad body", () => {
  const valid = () => commandRun("true", { testCommand: "true" });

  const cases: [name: string, body: Record<string, unknown>, path: string | RegExp][] = [
    ["missing task", (({ task: _task, ...rest }) => rest)(valid()), "task"],
    ["empty task", { ...valid(), task: "   " }, "task"],
    ["unknown key", { ...valid(), foo: 1 }, "foo"],
    [
      "unknown key inside agent",
      { ...valid(), agent: { type: "command", command: "true", shell: "bash" } },
      "agent.shell",
    ],
    ["missing agent", (({ agent: _agent, ...rest }) => rest)(valid()), "agent"],
    ["unknown agent type", { ...valid(), agent: { type: "nope", command: "true" } }, /^agent/],
    ["no gate", { task: "no gate", agent: { type: "command", command: "true" } }, ""],
    [
      "empty validationCommands as the only gate",
      { task: "t", agent: { type: "command", command: "true" }, validationCommands: [] },
      "",
    ],
    ["maxIterations 0", { ...valid(), maxIterations: 0 }, "maxIterations"],
    ["maxIterations not an integer", { ...valid(), maxIterations: 1.5 }, "maxIterations"],
    ["negative cooldownMs", { ...valid(), cooldownMs: -1 }, "cooldownMs"],
    ["bad sessionId", { ...valid(), sessionId: "no spaces please" }, "sessionId"],
    ["workspace escaping with ..", { ...valid(), workspace: "../x" }, "workspace"],
    ["absolute workspace", { ...valid(), workspace: "/etc" }, "workspace"],
    ["workspace escaping through ..", { ...valid(), workspace: "a/../../escaped" }, "workspace"],
    ["absolute focus file", { ...valid(), filePaths: ["src/a.ts", "/etc/passwd"] }, "filePaths.1"],
    ["focus file escaping with ..", { ...valid(), filePaths: ["../../etc/passwd"] }, "filePaths.0"],
    ["focus file escaping through ..", { ...valid(), filePaths: ["a/../../x"] }, "filePaths.0"],
    ...(
      [
        [
          "a secret in an MCP server's env",
          { env: { GITHUB_TOKEN: "plainvalue0123456789" } },
          "env.GITHUB_TOKEN",
        ],
        [
          "a secret after an MCP server's --api-key",
          { args: ["--api-key", "zzKEY0123456789"] },
          "args.1",
        ],
        [
          "a secret in an MCP server's --token=",
          { args: ["serve", "--token=zz0123456789"] },
          "args.1",
        ],
        [
          "a secret in an MCP server's header",
          { url: "https://mcp.example/mcp", headers: { Authorization: "Token tkn0123456789" } },
          "headers.Authorization",
        ],
        [
          "a key in an MCP server's url",
          { url: "https://mcp.example/mcp?key=qqSECRET0123" },
          "url",
        ],
      ] as const
    ).map(([name, server, path]): [string, Record<string, unknown>, string] => [
      name,
      {
        ...valid(),
        agent: { type: "mistral" },
        mcpServers: [{ name: "s", ...("url" in server ? {} : { command: "server" }), ...server }],
      },
      `mcpServers.0.${path}`,
    ]),
  ];

  for (const [name, body, path] of cases) {
    it(`answers 400 invalid_request naming the field: ${name}`, async () => {
      const before = await allRunIds();
      const workspacesBefore = readdirSync(stack.workspacesRoot).sort();
      const sessionId = unique("rejected");
      const res = await stack.api("POST", "/api/runs", { sessionId, ...body });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
      expect(res.body.error.message).toEqual(expect.any(String));
      const paths: string[] = res.body.error.issues.map((i: { path: string }) => i.path);
      for (const issue of res.body.error.issues) expect(issue.message).toEqual(expect.any(String));
      if (typeof path === "string") expect(paths).toContain(path);
      else
        expect(
          paths.some((p) => path.test(p)),
          JSON.stringify(paths),
        ).toBe(true);

      // Nothing stored, nothing created.
      expect(await allRunIds()).toEqual(before);
      expect(readdirSync(stack.workspacesRoot).sort()).toEqual(workspacesBefore);
      if (body.sessionId === undefined) {
        expect((await stack.api("GET", `/api/sessions/${sessionId}`)).status).toBe(404);
      }
    });
  }

  it("creates nothing outside WORKSPACES_ROOT for rejected escapes", async () => {
    for (const workspace of ["../x", "../x/y", "a/../../x"]) {
      const res = await stack.api("POST", "/api/runs", { ...valid(), workspace });
      expect(res.status).toBe(400);
      expect(res.body.error.issues.map((i: { path: string }) => i.path)).toEqual(["workspace"]);
    }
    expect(existsSync(join(stack.dir, "x"))).toBe(false);
    expect(existsSync(join(stack.workspacesRoot, "a"))).toBe(false);
  });

  it("refuses a workspace that leads out of WORKSPACES_ROOT through a symlink", async () => {
    const outside = join(stack.dir, "outside");
    mkdirSync(outside);
    symlinkSync(outside, join(stack.workspacesRoot, "sneaky"));
    const res = await stack.api("POST", "/api/runs", { ...valid(), workspace: "sneaky/inner" });
    expect(res.status).toBe(400);
    expect(res.body.error.issues.map((i: { path: string }) => i.path)).toEqual(["workspace"]);
    expect(existsSync(join(outside, "inner"))).toBe(false);
  });

  it("answers 400 for malformed JSON", async () => {
    const before = await allRunIds();
    const res = await stack.api("POST", "/api/runs", undefined, { raw: '{"task": "x", ' });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("invalid_request");
    expect(res.body.error.issues).toEqual([{ path: "", message: expect.any(String) }]);
    const notAnObject = await stack.api("POST", "/api/runs", ["task"]);
    expect(notAnObject.status).toBe(400);
    expect(notAnObject.body.error.code).toBe("invalid_request");
    expect(await allRunIds()).toEqual(before);
  });
});

describe("run history", () => {
  it("pages newest first, filters by session and status, and lists sessions", async () => {
    const a = unique("hist-a");
    const b = unique("hist-b");
    const finish = async (body: Record<string, unknown>) => {
      const { id } = await submit(stack, body);
      return waitForStatus(stack, id);
    };
    const a1 = await finish(commandRun("true", { sessionId: a, testCommand: "true" }));
    const b1 = await finish(commandRun("true", { sessionId: b, testCommand: "true" }));
    const a2 = await finish(
      commandRun("true", { sessionId: a, testCommand: "false", maxIterations: 1 }),
    );
    const a3 = await finish(commandRun("true", { sessionId: a, testCommand: "true" }));
    // The last one holds its session until released.
    const b2 = await submit(
      stack,
      commandRun("while [ ! -f release ]; do sleep 0.1; done", {
        sessionId: b,
        testCommand: "true",
      }),
    );
    const b2Running = await waitForStatus(stack, b2.id, ["running"]);
    expect([a1.status, b1.status, a2.status, a3.status]).toEqual([
      "succeeded",
      "succeeded",
      "failed",
      "succeeded",
    ]);
    const mine = [b2.id, a3.id, a2.id, b1.id, a1.id]; // newest first

    // Paging through everything, two at a time.
    const all = await allRunIds();
    const paged: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = cursor ? `limit=2&cursor=${cursor}` : "limit=2";
      const res = await stack.api<Page>("GET", `/api/runs?${query}`);
      expect(res.status).toBe(200);
      expect(res.body.items.length).toBeLessThanOrEqual(2);
      paged.push(...res.body.items.map((r) => r.id));
      cursor = res.body.nextCursor;
      if (cursor !== null) expect(res.body.items).toHaveLength(2);
      pages++;
      expect(pages).toBeLessThan(100);
    } while (cursor !== null);
    expect(paged).toEqual(all);
    expect(new Set(paged).size).toBe(paged.length);
    expect(paged.filter((id) => mine.includes(id))).toEqual(mine);
    const sorted = [...paged].sort().reverse();
    expect(paged).toEqual(sorted);

    // By session.
    const sessionA = await stack.api<Page>("GET", `/api/runs?sessionId=${a}`);
    expect(sessionA.body.items.map((r) => r.id)).toEqual([a3.id, a2.id, a1.id]);
    expect(sessionA.body.nextCursor).toBeNull();
    const firstA = await stack.api<Page>("GET", `/api/runs?sessionId=${a}&limit=2`);
    expect(firstA.body.items.map((r) => r.id)).toEqual([a3.id, a2.id]);
    expect(firstA.body.nextCursor).toEqual(expect.any(String));
    const restA = await stack.api<Page>(
      "GET",
      `/api/runs?sessionId=${a}&limit=2&cursor=${firstA.body.nextCursor}`,
    );
    expect(restA.body.items.map((r) => r.id)).toEqual([a1.id]);
    expect(restA.body.nextCursor).toBeNull();

    // By status, alone and with a session.
    const failed = await stack.api<Page>("GET", "/api/runs?status=failed&limit=100");
    expect(failed.body.items.every((r) => r.status === "failed")).toBe(true);
    expect(failed.body.items.map((r) => r.id)).toContain(a2.id);
    const running = await stack.api<Page>("GET", "/api/runs?status=running&limit=100");
    expect(running.body.items.map((r) => r.id)).toContain(b2.id);
    expect(running.body.items.every((r) => r.status === "running")).toBe(true);
    const bSucceeded = await stack.api<Page>("GET", `/api/runs?sessionId=${b}&status=succeeded`);
    expect(bSucceeded.body.items.map((r) => r.id)).toEqual([b1.id]);
    const none = await stack.api<Page>("GET", `/api/runs?sessionId=${unique("nobody")}`);
    expect(none.body).toEqual({ items: [], nextCursor: null });

    // Sessions.
    const sa = await stack.api("GET", `/api/sessions/${a}`);
    expect(sa.status).toBe(200);
    expect(sa.body).toMatchObject({ id: a, activeRunId: null, createdAt: expect.any(String) });
    expect(sa.body.runs.map((r: RunView) => r.id)).toEqual([a3.id, a2.id, a1.id]);
    const sb = await stack.api("GET", `/api/sessions/${b}`);
    expect(sb.body.activeRunId).toBe(b2.id);
    expect(sb.body.runs.map((r: RunView) => [r.id, r.status])).toEqual([
      [b2.id, "running"],
      [b1.id, "succeeded"],
    ]);
    // A session keeps its workspace across runs.
    expect(b2Running.workspace).toBe(b1.workspace);

    writeFileSync(join(b2Running.workspace, "release"), "");
    await waitForStatus(stack, b2.id);
    expect((await stack.api("GET", `/api/sessions/${b}`)).body.activeRunId).toBeNull();
  });

  it("runs a session's next run, naming no workspace, in the one its first run named", async () => {
    const session = unique("named");
    const named = unique("shared");
    const finish = async (body: Record<string, unknown>) =>
      waitForStatus(stack, (await submit(stack, body)).id);
    const agent = "echo ran >> runs.txt";
    const test = '[ "$(wc -l < runs.txt)" -ge 1 ]';
    const first = await finish(
      commandRun(agent, { sessionId: session, workspace: named, testCommand: test }),
    );
    // Its session's stored workspace is not the one named after the session: looked up.
    const next = await finish(commandRun(agent, { sessionId: session, testCommand: test }));
    expect([first.status, next.status]).toEqual(["succeeded", "succeeded"]);
    expect(next.workspace).toBe(first.workspace);
    expect(first.workspace.endsWith(`/${named}`)).toBe(true);
    expect(existsSync(join(stack.workspacesRoot, session))).toBe(false);
  });

  it("answers 400 for bad list parameters", async () => {
    const bad: [query: string, path: string][] = [
      ["limit=0", "limit"],
      ["limit=101", "limit"],
      ["limit=x", "limit"],
      ["status=nope", "status"],
      ["cursor=not-a-cursor", "cursor"],
      ["sessionId=has%20space", "sessionId"],
      ["bogus=1", "bogus"],
    ];
    for (const [query, path] of bad) {
      const res = await stack.api("GET", `/api/runs?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
      expect(
        res.body.error.issues.map((i: { path: string }) => i.path),
        query,
      ).toContain(path);
    }
    expect((await stack.api("GET", "/api/runs?limit=100")).status).toBe(200);
    expect((await stack.api("GET", "/api/runs?limit=1")).status).toBe(200);
  });

  it("pages events with an exclusive `after`", async () => {
    const { id } = await submit(stack, commandRun("true", { testCommand: "true" }));
    await waitForStatus(stack, id);
    const events = await getEvents(stack, id);
    expect(events.length).toBeGreaterThan(3);
    const res = await stack.api("GET", `/api/runs/${id}/events?after=2`);
    expect(res.body.items.map((e: { seq: number }) => e.seq)).toEqual(
      events.slice(2).map((e) => e.seq),
    );
    const tail = await stack.api("GET", `/api/runs/${id}/events?after=${events.length}`);
    expect(tail.body.items).toEqual([]);
  });

  it("answers 404 not_found for unknown runs and sessions", async () => {
    const unknown = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
    for (const path of [
      `/api/runs/${unknown}`,
      `/api/runs/${unknown}/iterations`,
      `/api/runs/${unknown}/events`,
      `/api/runs/${unknown}/tool-calls`,
      `/api/runs/${unknown}/reviews`,
      `/api/sessions/${unique("nobody")}`,
    ]) {
      const res = await stack.api("GET", path);
      expect(res.status, path).toBe(404);
      expect(res.body.error).toMatchObject({ code: "not_found", message: expect.any(String) });
    }
  });
});
