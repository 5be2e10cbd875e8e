import { existsSync, mkdirSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type ApiHarness, apiHarness, ENGINES } from "./api-harness";

const valid = {
  task: "make the tests pass",
  agent: { type: "command", command: "true" },
  testCommand: "true",
};

describe.each(ENGINES)("runs API over app.request() on %s", (engine) => {
  let h: ApiHarness;
  beforeAll(async () => {
    h = await apiHarness(inject("redisUrl"), engine);
    await h.untilReady();
  });
  afterAll(async () => {
    await h.close();
  });

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
      validationCommands: ["true"],
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

  it("takes maxAttempts as a legacy alias, maxIterations winning over it", async () => {
    const a = await h.request("POST", "/api/runs", { ...valid, maxAttempts: 3 });
    const b = await h.request("POST", "/api/runs", { ...valid, maxAttempts: 3, maxIterations: 4 });
    expect((await h.request("GET", `/api/runs/${a.body.id}`)).body.budget.maxIterations).toBe(3);
    expect((await h.request("GET", `/api/runs/${b.body.id}`)).body.budget.maxIterations).toBe(4);
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
    [{ ...valid, validationCommands: "npm test" }, "validationCommands"],
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

  it("refuses a workspace that leaves the root through a symlink, creating nothing outside", async () => {
    mkdirSync(h.workspacesRoot, { recursive: true });
    const outside = join(h.workspacesRoot, "..", "outside-target");
    mkdirSync(outside, { recursive: true });
    symlinkSync(outside, join(h.workspacesRoot, "escape"));
    const res = await h.request("POST", "/api/runs", { ...valid, workspace: "escape/sub" });
    expect(res.status).toBe(400);
    expect(res.body.error.issues[0].path).toBe("workspace");
    expect(existsSync(join(outside, "sub"))).toBe(false);
  });

  it("refuses a workspace under a file, naming it, storing nothing", async () => {
    mkdirSync(h.workspacesRoot, { recursive: true });
    writeFileSync(join(h.workspacesRoot, "a-file"), "not a directory\n");
    const before = await h.request("GET", "/api/runs?limit=100");
    const res = await h.request("POST", "/api/runs", { ...valid, workspace: "a-file/sub" });
    expect(res.status).toBe(400);
    expect(res.body.error.issues[0]).toMatchObject({
      path: "workspace",
      message: "a-file is not a directory",
    });
    const after = await h.request("GET", "/api/runs?limit=100");
    expect(after.body.items).toHaveLength(before.body.items.length);
  });

  it("validates query strings", async () => {
    for (const q of [
      "limit=0",
      "limit=101",
      "limit=x",
      "status=nope",
      "cursor=abc",
      "unknown=1",
      "sessionId=a%20b",
    ]) {
      const res = await h.request("GET", `/api/runs?${q}`);
      expect(res.status, q).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
    }
    const ev = await h.request("GET", "/api/runs/x/events?after=-1");
    expect(ev.status).toBe(400);
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

describe("readiness on PostgreSQL", () => {
  it("reports db down with 503 once the database is gone", async () => {
    const h = await apiHarness(inject("redisUrl"), "postgres");
    try {
      await h.untilReady();
      expect(await h.request("GET", "/readyz")).toEqual({
        status: 200,
        body: { redis: "up", db: "up" },
      });
      await h.dropDatabase();
      expect(await h.request("GET", "/readyz")).toEqual({
        status: 503,
        body: { redis: "up", db: "down" },
      });
    } finally {
      await h.close();
    }
  });
});

describe.each(ENGINES)("runs API while Redis is unreachable on %s", (engine) => {
  it("answers 503 unavailable at once and stores nothing", async () => {
    // Port 1 on loopback: nothing listens there.
    const h = await apiHarness("redis://127.0.0.1:1", engine);
    try {
      const res = await h.request("POST", "/api/runs", valid);
      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe("unavailable");
      // Bad input is still named (400), not hidden behind the 503.
      const bad = await h.request("POST", "/api/runs", { ...valid, workspace: "../outside" });
      expect(bad.status).toBe(400);
      expect(bad.body.error.issues[0].path).toBe("workspace");
      expect((await h.repo.listRuns({ limit: 10 })).items).toHaveLength(0);
      const ready = await h.request("GET", "/readyz");
      expect(ready).toEqual({ status: 503, body: { redis: "down", db: "up" } });
    } finally {
      await h.close();
    }
  });
});

describe("runs API with API_TOKEN", () => {
  it("answers 401 unauthorized without the bearer token and serves the API with it", async () => {
    const { createApp } = await import("../src/app");
    const h = await apiHarness(inject("redisUrl"));
    try {
      const token = "a-token-of-some-length";
      const app = createApp({
        repo: h.repo,
        queue: h.queue,
        workspacesRoot: h.workspacesRoot,
        dbHealthy: () => true,
        apiToken: token,
      });
      for (const auth of [undefined, "Bearer wrong", `Basic ${token}`, "Bearer "]) {
        const res = await app.request("/api/runs", {
          headers: auth ? { authorization: auth } : {},
        });
        expect(res.status, String(auth)).toBe(401);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe("unauthorized");
      }
      const ok = await app.request("/api/runs", { headers: { authorization: `Bearer ${token}` } });
      expect(ok.status).toBe(200);
      // Open without the token (its answer, 200 or 503, is whether Redis is connected yet).
      const health = await app.request("/healthz");
      expect(health.status).not.toBe(401);
      expect(Object.keys((await health.json()) as object).sort()).toEqual(["db", "redis"]);
    } finally {
      await h.close();
    }
  });
});

describe("runs API limits", () => {
  it("answers 413 payload_too_large for a 3 MB body and stores nothing", async () => {
    const h = await apiHarness(inject("redisUrl"));
    try {
      await h.untilReady();
      const res = await h.request("POST", "/api/runs", {
        ...valid,
        task: "x".repeat(3 * 1024 * 1024),
      });
      expect(res.status).toBe(413);
      expect(res.body.error.code).toBe("payload_too_large");
      expect((await h.repo.listRuns({ limit: 10 })).items).toHaveLength(0);
    } finally {
      await h.close();
    }
  });

  it("answers 429 rate_limited with Retry-After past the per-client limit", async () => {
    const { createApp } = await import("../src/app");
    const h = await apiHarness(inject("redisUrl"));
    try {
      const app = createApp({
        repo: h.repo,
        queue: h.queue,
        workspacesRoot: h.workspacesRoot,
        dbHealthy: () => true,
        rateLimitPerMinute: 5,
      });
      const statuses: number[] = [];
      let retryAfter: string | null = null;
      for (let i = 0; i < 7; i++) {
        const res = await app.request("/api/runs");
        statuses.push(res.status);
        if (res.status === 429) {
          retryAfter = res.headers.get("retry-after");
          expect(((await res.json()) as { error: { code: string } }).error.code).toBe(
            "rate_limited",
          );
        }
      }
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
      expect(Number(retryAfter)).toBeGreaterThan(0);
    } finally {
      await h.close();
    }
  });

  it("sends no CORS headers unless origins are configured", async () => {
    const { createApp } = await import("../src/app");
    const h = await apiHarness(inject("redisUrl"));
    try {
      const plain = await h.app.request("/api/runs", {
        headers: { origin: "https://evil.example" },
      });
      expect(plain.headers.get("access-control-allow-origin")).toBeNull();
      const app = createApp({
        repo: h.repo,
        queue: h.queue,
        workspacesRoot: h.workspacesRoot,
        dbHealthy: () => true,
        corsOrigins: ["https://ok.example"],
      });
      const ok = await app.request("/api/runs", { headers: { origin: "https://ok.example" } });
      expect(ok.headers.get("access-control-allow-origin")).toBe("https://ok.example");
    } finally {
      await h.close();
    }
  });
});

describe.each(ENGINES)("idempotent submit on %s", (engine) => {
  it("returns the same run for the same key and body, 422 for the same key with another body", async () => {
    const h = await apiHarness(inject("redisUrl"), engine);
    try {
      await h.untilReady();
      const post = async (body: unknown, key: string) => {
        const res = await h.app.request("/api/runs", {
          method: "POST",
          headers: { "content-type": "application/json", "idempotency-key": key },
          body: JSON.stringify(body),
        });
        return {
          status: res.status,
          body: (await res.json()) as { id: string; error?: { code: string } },
        };
      };
      const first = await post({ ...valid, sessionId: "idem-1" }, "key-1");
      // The same body with its keys in another order is the same request.
      const again = await post(
        { sessionId: "idem-1", testCommand: "true", agent: valid.agent, task: valid.task },
        "key-1",
      );
      expect(first.status).toBe(202);
      expect(again.status).toBe(202);
      expect(again.body.id).toBe(first.body.id);
      expect((await h.repo.listRuns({ sessionId: "idem-1", limit: 10 })).items).toHaveLength(1);
      const other = await post({ ...valid, sessionId: "idem-1", task: "something else" }, "key-1");
      expect(other.status).toBe(422);
      expect(other.body.error?.code).toBe("idempotency_conflict");
      const bad = await post(valid, "");
      expect(bad.status).toBe(400);
    } finally {
      await h.close();
    }
  });
});
