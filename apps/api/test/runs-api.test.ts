import { existsSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ENGINES, useApiHarness, VALID_RUN as valid } from "./api-harness";

// Readiness with a database or Redis down, the token, the limits: runs-api-guards.test.ts;
// where a run's workspace lies: runs-api-workspaces.test.ts.

/** A valid body with a mistral agent and these MCP servers. */
const mcp = (...mcpServers: unknown[]) => ({
  ...valid,
  agent: { type: "mistral" },
  mcpServers,
});

describe.each(ENGINES)("runs API over app.request() on %s", (engine) => {
  const h = useApiHarness(engine);

  it("accepts a run: 202, stored as queued with a run_queued event, enqueued with job id = run id", async () => {
    const res = await h.request("POST", "/api/runs", { ...valid, sessionId: "accept-1" });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ sessionId: "accept-1", status: "queued" });
    expect(typeof res.body.createdAt).toBe("string");
    const job = await h.inspect.getJob(res.body.id);
    expect(job?.data).toEqual({ runId: res.body.id });

    const run = await h.request("GET", `/api/runs/${res.body.id}`);
    expect(run.status).toBe(200);
    expect(run.body).toMatchObject({
      id: res.body.id,
      status: "queued",
      iteration: 0,
      budget: { maxIterations: 6, maxMinutes: 45, remainingIterations: 6, elapsedMs: 0 },
      metrics: {
        iterations: 0,
        validationFailures: 0,
        reviewBlockings: 0,
        toolCalls: 0,
        toolFailures: 0,
        tokens: 0,
      },
      testCommand: "true",
      validationCommands: ["true"],
      validationTimeoutMs: 600_000,
    });
    // The workspace is where the run will run; the worker that starts it creates it.
    expect(run.body.workspace).toBe(join(realpathSync(h.workspacesRoot), "accept-1"));
    expect(existsSync(join(h.workspacesRoot, "accept-1"))).toBe(false);
    const events = await h.request("GET", `/api/runs/${res.body.id}/events`);
    expect(events.body.items.map((e: { type: string }) => e.type)).toEqual(["run_queued"]);
    expect(events.body.items[0]).toMatchObject({
      seq: 1,
      data: { budget: { elapsedMs: 0, remainingIterations: 6 } },
    });
  });

  it("names a number past every bound once, with the bound a client can meet", async () => {
    const res = await h.request("POST", "/api/runs", {
      ...valid,
      maxIterations: 2 ** 60,
      cooldownMs: -(2 ** 60),
      agent: { type: "command", command: "true", timeoutMs: 1e20 },
    });
    expect(res.status).toBe(400);
    expect(res.body.error.issues).toEqual([
      { path: "agent.timeoutMs", message: "Too big: expected number to be <=86400000" },
      { path: "maxIterations", message: "Too big: expected number to be <=1000" },
      { path: "cooldownMs", message: "Too small: expected number to be >=0" },
    ]);
  });

  it("takes maxAttempts as a legacy alias, maxIterations winning over it", async () => {
    const a = await h.request("POST", "/api/runs", { ...valid, maxAttempts: 3 });
    const b = await h.request("POST", "/api/runs", { ...valid, maxAttempts: 3, maxIterations: 4 });
    expect((await h.request("GET", `/api/runs/${a.body.id}`)).body.budget.maxIterations).toBe(3);
    expect((await h.request("GET", `/api/runs/${b.body.id}`)).body.budget.maxIterations).toBe(4);
  });

  it(`shows the MCP servers a run adds as submitted: their \${NAME} references, no value`, async () => {
    const mcpServers = [
      {
        name: "gh",
        command: "npx",
        args: ["-y", "github-mcp"],
        env: { GITHUB_TOKEN: `\${GH_PAT}` },
      },
      {
        name: "docs",
        url: "https://docs.example/mcp",
        headers: { Authorization: `Bearer \${DOCS}` },
      },
    ];
    const res = await h.request("POST", "/api/runs", {
      ...valid,
      agent: { type: "mistral", model: "mistral-small-latest" },
      mcpServers,
    });
    expect(res.status).toBe(202);
    expect((await h.request("GET", `/api/runs/${res.body.id}`)).body.mcpServers).toEqual(
      mcpServers,
    );
    const plain = await h.request("POST", "/api/runs", valid);
    expect((await h.request("GET", `/api/runs/${plain.body.id}`)).body.mcpServers).toEqual([]);
  });

  it("refuses a second active run in a session with 409 run_already_active", async () => {
    const first = await h.request("POST", "/api/runs", { ...valid, sessionId: "busy-1" });
    const second = await h.request("POST", "/api/runs", { ...valid, sessionId: "busy-1" });
    expect(second.status).toBe(409);
    expect(second.body.error).toMatchObject({
      code: "run_already_active",
      activeRunId: first.body.id,
    });
    const session = await h.request("GET", "/api/sessions/busy-1");
    expect(session.body).toMatchObject({ id: "busy-1", activeRunId: first.body.id });
    expect(session.body.runs).toHaveLength(1);
  });

  it.each([
    [{ ...valid, task: undefined }, "task"],
    [{ ...valid, task: "" }, "task"],
    [{ ...valid, foo: 1 }, "foo"],
    [{ ...valid, agent: { type: "nope" } }, "agent.type"],
    [{ ...valid, agent: { type: "command" } }, "agent.command"],
    [{ task: "x", agent: valid.agent }, ""],
    [{ ...valid, maxIterations: 0 }, "maxIterations"],
    [{ ...valid, sessionId: "bad id!" }, "sessionId"],
    [{ ...valid, workspace: "../outside" }, "workspace"],
    [{ ...valid, workspace: "/etc" }, "workspace"],
    [{ ...valid, workspace: `ok/${"a".repeat(256)}` }, "workspace"],
    [{ ...valid, validationCommands: "npm test" }, "validationCommands"],
    [{ ...valid, testCommand: "true\u0000 && echo" }, "testCommand"],
    [{ ...valid, agent: { type: "command", command: "true\u0000" } }, "agent.command"],
    [{ ...valid, validationCommands: ["true", "x\u0000"] }, "validationCommands.1"],
    [mcp({ name: "workspace", command: "x" }), "mcpServers.0.name"],
    [{ ...mcp({ name: "a", command: "x" }), agent: valid.agent }, "mcpServers"],
    [
      mcp({ name: "a", command: "x" }, { name: "a", url: "https://a.example" }),
      "mcpServers.1.name",
    ],
    [mcp({ name: "a", command: "x", args: ["-v", "a\u0000"] }), "mcpServers.0.args.1"],
    [mcp({ name: "a", command: "x", env: { "A=B": "1" } }), "mcpServers.0.env.A=B"],
    [mcp({ name: "a", command: "x", env: { A: "1\u0000" } }), "mcpServers.0.env.A"],
    [
      mcp({ name: "a", url: "https://a.example", headers: { X: "1\r\nY: 2" } }),
      "mcpServers.0.headers.X",
    ],
    ["{not json", ""],
    [[1, 2], ""],
  ])("refuses %j with 400 naming %j, storing nothing", async (body, path) => {
    const before = await h.request("GET", "/api/runs?limit=100");
    const res = await h.request("POST", "/api/runs", body);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("invalid_request");
    expect(res.body.error.issues.map((i: { path: string }) => i.path)).toContain(path);
    expect(res.body.error.message).toBeTruthy();
    const after = await h.request("GET", "/api/runs?limit=100");
    expect(after.body.items).toHaveLength(before.body.items.length);
  });

  it.each([
    // A stdio server with a bad command, not an HTTP server lacking its url.
    [mcp({ name: "a", command: 5 }), "mcpServers.0.command", "expected string"],
    [mcp({ name: "a", url: "https://a.example", headers: 1 }), "mcpServers.0.headers", "record"],
    // As close to both forms: one issue saying what each lacks.
    [mcp({ name: "a" }), "mcpServers.0", "command: Invalid input: expected string"],
    [
      mcp({ name: "a", command: "x", url: "https://a.example" }),
      "mcpServers.0",
      "unknown field url",
    ],
    [mcp("a"), "mcpServers.0", "expected object, received string"],
  ])("names what is wrong in a server of either form: %j → %s", async (body, path, says) => {
    const res = await h.request("POST", "/api/runs", body);
    expect(res.status).toBe(400);
    const issues = res.body.error.issues as { path: string; message: string }[];
    expect(issues).toContainEqual({ path, message: expect.stringContaining(says) });
    expect(issues.map((i) => i.message)).not.toContain("Invalid input");
  });

  it.each([
    [{ ...valid, task: "   " }, "task"],
    [{ ...valid, testCommand: " \t " }, "testCommand"],
    [{ ...valid, agent: { type: "command", command: "  " } }, "agent.command"],
  ])("says a blank field is blank, not too short: %j", async (body, path) => {
    const res = await h.request("POST", "/api/runs", body);
    expect(res.status).toBe(400);
    expect(res.body.error.issues).toContainEqual({
      path,
      message: "must not be empty or only whitespace",
    });
  });

  it("validates query strings", async () => {
    for (const q of [
      "limit=0",
      "limit=101",
      "limit=x",
      "status=nope",
      "cursor=abc",
      // 26 characters of the alphabet, but past the largest ULID (its time would overflow).
      "cursor=8ZZZZZZZZZZZZZZZZZZZZZZZZZ",
      "unknown=1",
      "sessionId=a%20b",
      "limit=",
      "limit=0x10",
      "limit=1e1",
      "limit=%205",
    ]) {
      const res = await h.request("GET", `/api/runs?${q}`);
      expect(res.status, q).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
    }
    // Numbers are decimal digits: not "" read as 0, nor hex or exponents.
    for (const path of [
      "/api/runs/x/events?after=-1",
      "/api/runs/x/events?after=",
      "/api/runs/x/events?after=1e1",
      "/api/runs/x/events?limit=0x10",
      "/api/runs/x/events/stream?after=",
      "/api/stats/tools?patterns=0x5",
    ]) {
      const res = await h.request("GET", path);
      expect(res.status, path).toBe(400);
      expect(res.body.error.issues[0].path, path).toMatch(/^(after|limit|patterns)$/);
    }
    expect((await h.request("GET", "/api/runs?limit=5")).status).toBe(200);
    // Each says what is wrong with the number.
    for (const [q, message] of [
      ["limit=-1", "limit: Too small: expected number to be >=1"],
      // Past the safe integers too: the bound a client can meet.
      ["limit=99999999999999999999", "limit: Too big: expected number to be <=100"],
      ["limit=101", "limit: Too big: expected number to be <=100"],
      ["limit=1.5", "limit: must be a whole number (decimal digits)"],
      ["limit=1e1", "limit: must be a whole number (decimal digits)"],
    ]) {
      const res = await h.request("GET", `/api/runs?${q}`);
      expect(res.body.error.message, q).toBe(message);
    }
    // Where the schema has no bound of its own, a number past the safe integers is refused too.
    const far = await h.request("GET", "/api/runs/x/events?after=99999999999999999999");
    expect(far.status).toBe(400);
    expect(far.body.error.issues[0].path).toBe("after");
  });

  it("ignores the query string of a route that takes none (a cache-buster), as its 404s", async () => {
    const created = await h.request("POST", "/api/runs", { ...valid, sessionId: "no-query" });
    const id = created.body.id;
    for (const path of [
      `/api/runs/${id}`,
      `/api/runs/${id}/iterations`,
      `/api/runs/${id}/tool-calls`,
      `/api/runs/${id}/reviews`,
      `/api/runs/${id}/artifacts`,
      "/api/sessions/no-query",
    ]) {
      const res = await h.request("GET", `${path}?_=1700000000&_=2`);
      expect(res.status, path).toBe(200);
    }
    const missing = await h.request("GET", "/api/runs/nope?_=1");
    expect(missing.status).toBe(404);
  });

  it("pages newest first with a cursor and filters by session and status", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await h.request("POST", "/api/runs", { ...valid, sessionId: `page-${i}` });
      ids.push(res.body.id);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res: { body: { items: { id: string }[]; nextCursor: string | null } } = await h.request(
        "GET",
        `/api/runs?limit=2${cursor ? `&cursor=${cursor}` : ""}`,
      );
      expect(res.body.items.length).toBeLessThanOrEqual(2);
      seen.push(...res.body.items.map((r) => r.id));
      cursor = res.body.nextCursor;
    } while (cursor);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual([...seen].sort().reverse());
    expect(seen.slice(0, 5)).toEqual([...ids].reverse());

    const bySession = await h.request("GET", "/api/runs?sessionId=page-3");
    expect(bySession.body.items.map((r: { id: string }) => r.id)).toEqual([ids[3]]);
    const queued = await h.request("GET", "/api/runs?status=queued&limit=100");
    expect(queued.body.items.every((r: { status: string }) => r.status === "queued")).toBe(true);
    const none = await h.request("GET", "/api/runs?status=succeeded");
    expect(none.body).toEqual({ items: [], nextCursor: null });
  });

  it("stops a queued run at once (no worker holds it); a second stop answers stopped again", async () => {
    const created = await h.request("POST", "/api/runs", { ...valid, sessionId: "stop-1" });
    const stop = await h.request("POST", `/api/runs/${created.body.id}/stop`);
    expect(stop.status).toBe(202);
    expect(stop.body).toEqual({ id: created.body.id, status: "stopped" });
    expect(await h.inspect.getJob(created.body.id)).toBeUndefined();
    const run = await h.request("GET", `/api/runs/${created.body.id}`);
    expect(run.body).toMatchObject({ status: "stopped", reason: "stopped" });
    const types = (await h.request("GET", `/api/runs/${created.body.id}/events`)).body.items.map(
      (e: { type: string }) => e.type,
    );
    expect(types).toEqual(["run_queued", "stop_requested", "run_finished"]);
    const again = await h.request("POST", `/api/runs/${created.body.id}/stop`);
    expect(again.status).toBe(202);
    expect(again.body).toEqual({ id: created.body.id, status: "stopped" });
    // Nothing is recorded twice.
    const after = (await h.request("GET", `/api/runs/${created.body.id}/events`)).body.items;
    expect(after.map((e: { type: string }) => e.type)).toEqual(types);
    // Each event's data carries the budget snapshot, as `budget` and spread into the data.
    for (const e of after) {
      expect(e.data.budget).toMatchObject({ elapsedMs: 0, remainingIterations: 6 });
      expect(e.data).toMatchObject({ elapsedMs: 0, remainingIterations: 6 });
    }
    expect(after.at(-1).data).toMatchObject({ reason: "stopped", budget: { reason: "stopped" } });
    // The session is free again.
    const next = await h.request("POST", "/api/runs", { ...valid, sessionId: "stop-1" });
    expect(next.status).toBe(202);
  });

  it("answers 404 not_found for unknown runs, sessions and routes", async () => {
    for (const path of [
      "/api/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV",
      "/api/runs/nope/iterations",
      "/api/runs/nope/tool-calls",
      "/api/runs/nope/reviews",
      "/api/runs/nope/events",
      "/api/sessions/nope",
      "/api/nothing-here",
    ]) {
      const res = await h.request("GET", path);
      expect(res.status, path).toBe(404);
      expect(res.body.error.code).toBe("not_found");
    }
    expect((await h.request("POST", "/api/runs/nope/stop")).status).toBe(404);
  });

  it("serves empty tool-call and review lists for a run without them", async () => {
    const created = await h.request("POST", "/api/runs", { ...valid });
    expect((await h.request("GET", `/api/runs/${created.body.id}/tool-calls`)).body).toEqual({
      items: [],
    });
    expect((await h.request("GET", `/api/runs/${created.body.id}/reviews`)).body).toEqual({
      items: [],
    });
    expect((await h.request("GET", `/api/runs/${created.body.id}/iterations`)).body).toEqual({
      items: [],
    });
  });

  it("reports readiness", async () => {
    const res = await h.request("GET", "/readyz");
    expect(res).toEqual({ status: 200, body: { redis: "up", db: "up" } });
    expect(await h.request("GET", "/healthz")).toEqual(res);
  });
});
