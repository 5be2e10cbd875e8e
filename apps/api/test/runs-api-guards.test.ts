import { mkdirSync, realpathSync } from "node:fs";
import { normalizeSubmission, RunSubmission } from "@looprun/core";
import { describe, expect, it } from "vitest";
import { apiHarness, ENGINES, useApiHarness, VALID_RUN as valid } from "./api-harness";

// What guards the API: readiness with the database or Redis gone, the token, the body and
// rate limits, CORS, idempotency keys (cross-site requests: cross-site.test.ts).

describe("readiness on PostgreSQL", () => {
  const h = useApiHarness("postgres", {}, { each: true });

  it("reports db down with 503 once the database is gone", async () => {
    expect(await h.request("GET", "/readyz")).toEqual({
      status: 200,
      body: { redis: "up", db: "up" },
    });
    await h.dropDatabase();
    expect(await h.request("GET", "/readyz")).toEqual({
      status: 503,
      body: { redis: "up", db: "down" },
    });
  });
});

describe.each(ENGINES)("runs API while Redis is unreachable on %s", (engine) => {
  it("answers 503 unavailable at once and stores nothing", async () => {
    // Port 1 on loopback: nothing listens there.
    const h = await apiHarness("redis://127.0.0.1:1", engine);
    try {
      mkdirSync(h.workspacesRoot, { recursive: true });
      const res = await h.request("POST", "/api/runs", valid);
      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe("unavailable");
      // Bad input is still named (400), not hidden behind the 503.
      const bad = await h.request("POST", "/api/runs", { ...valid, workspace: "../outside" });
      expect(bad.status).toBe(400);
      expect(bad.body.error.issues[0].path).toBe("workspace");
      expect((await h.repo.listRuns({ limit: 10 })).items).toHaveLength(0);
      // So is a session's stored workspace that is no longer valid (WORKSPACES_ROOT itself,
      // stored by an older looprun), though the run names none and nothing is stored.
      const root = realpathSync(h.workspacesRoot);
      await h.repo.createRun({
        id: "01J00000000000000000000000",
        sessionId: "old-root",
        sessionWorkspace: root,
        workspace: root,
        spec: normalizeSubmission(RunSubmission.parse(valid)),
        createdAt: Date.now(),
      });
      const stale = await h.request("POST", "/api/runs", { ...valid, sessionId: "old-root" });
      expect(stale.status).toBe(400);
      expect(stale.body.error.issues[0]).toEqual({
        path: "workspace",
        message:
          "the session's workspace is WORKSPACES_ROOT itself (kept from an older looprun): name a directory under it",
      });
      expect((await h.repo.listRuns({ limit: 10 })).items).toHaveLength(1);
      const ready = await h.request("GET", "/readyz");
      expect(ready).toEqual({ status: 503, body: { redis: "down", db: "up" } });
    } finally {
      await h.close();
    }
  });
});

describe.each(ENGINES)("a submit whose enqueue answer is lost on %s", (engine) => {
  const h = useApiHarness(engine, {}, { each: true });

  it("keeps the run a worker took meanwhile (202), takes back one nobody took (503)", async () => {
    // The job reaches Redis, its answer does not (the API's wait for it ran out); a worker
    // claims the run first in one case, not in the other.
    const lostAnswer = (claimed: boolean) =>
      h.appWith({
        queue: {
          ...h.queue,
          enqueue: async (runId: string) => {
            await h.queue.enqueue(runId);
            if (claimed) await h.store.claimRun(runId);
            throw new Error("Command timed out");
          },
        },
      });
    const post = async (app: ReturnType<typeof lostAnswer>, sessionId: string) => {
      const res = await app.request("/api/runs", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...valid, sessionId }),
      });
      return { status: res.status, body: (await res.json()) as { id?: string } };
    };
    const taken = await post(lostAnswer(true), "lost-answer-taken");
    expect(taken.status).toBe(202);
    expect((await h.repo.getRun(taken.body.id as string))?.sessionId).toBe("lost-answer-taken");
    const untaken = await post(lostAnswer(false), "lost-answer-free");
    expect(untaken.status).toBe(503);
    expect(await h.repo.getSession("lost-answer-free")).toBeNull();
  });
});

describe("runs API with API_TOKEN", () => {
  const h = useApiHarness("sqlite", {}, { each: true });

  it("answers 401 unauthorized without the bearer token and serves the API with it", async () => {
    const token = "a-token-of-some-length";
    const app = h.appWith({
      apiToken: token,
    });
    for (const auth of [undefined, "Bearer wrong", `Basic ${token}`, "Bearer "]) {
      const res = await app.request("/api/runs", {
        headers: auth ? { authorization: auth } : {},
      });
      expect(res.status, String(auth)).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe('Bearer realm="looprun"');
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("unauthorized");
    }
    const ok = await app.request("/api/runs", { headers: { authorization: `Bearer ${token}` } });
    expect(ok.status).toBe(200);
    // Open without the token (its answer, 200 or 503, is whether Redis is connected yet).
    const health = await app.request("/healthz");
    expect(health.status).not.toBe(401);
    expect(Object.keys((await health.json()) as object).sort()).toEqual(["db", "redis"]);
  });
});

describe("runs API with API_TOKEN and a body over the limit", () => {
  const h = useApiHarness("sqlite", {}, { each: true });

  it("answers 401 to a request without the token, whatever its size: 413 is for those who may submit", async () => {
    const token = "a-token-of-some-length";
    const app = h.appWith({ apiToken: token });
    const body = JSON.stringify({ ...valid, task: "x".repeat(3 * 1024 * 1024) });
    const post = (headers: Record<string, string>) =>
      app.request("/api/runs", {
        method: "POST",
        body,
        headers: { "content-type": "application/json", ...headers },
      });
    const anonymous = await post({});
    expect(anonymous.status).toBe(401);
    expect(((await anonymous.json()) as { error: { code: string } }).error.code).toBe(
      "unauthorized",
    );
    const known = await post({ authorization: `Bearer ${token}` });
    expect(known.status).toBe(413);
    expect((await h.repo.listRuns({ limit: 10 })).items).toHaveLength(0);
  });
});

describe("runs API limits", () => {
  const h = useApiHarness("sqlite", {}, { each: true });

  it("answers 413 payload_too_large for a 3 MB body and stores nothing", async () => {
    const res = await h.request("POST", "/api/runs", {
      ...valid,
      task: "x".repeat(3 * 1024 * 1024),
    });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe("payload_too_large");
    expect((await h.repo.listRuns({ limit: 10 })).items).toHaveLength(0);
  });

  it("answers 429 rate_limited with Retry-After past the per-client limit", async () => {
    const app = h.appWith({
      rateLimitPerMinute: 5,
    });
    const statuses: number[] = [];
    let retryAfter: string | null = null;
    for (let i = 0; i < 7; i++) {
      const res = await app.request("/api/runs");
      statuses.push(res.status);
      if (res.status === 429) {
        retryAfter = res.headers.get("retry-after");
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe("rate_limited");
      }
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
    expect(Number(retryAfter)).toBeGreaterThan(0);
    // The sign-in and the metrics take the token too: the same budget, not a way round it.
    const guesses = h.appWith({ apiToken: "the-token-0123456789", rateLimitPerMinute: 4 });
    const signIn = () =>
      guesses.request("/login", {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "token=a-guess",
      });
    const metrics = () =>
      guesses.request("/metrics", { headers: { authorization: "Bearer a-guess" } });
    const answers = [];
    for (const guess of [signIn, metrics, signIn, metrics, signIn, metrics])
      answers.push((await guess()).status);
    expect(answers).toEqual([401, 401, 401, 401, 429, 429]);
  });

  it("sends no CORS headers unless origins are configured", async () => {
    const plain = await h.app.request("/api/runs", {
      headers: { origin: "https://evil.example" },
    });
    expect(plain.headers.get("access-control-allow-origin")).toBeNull();
    const app = h.appWith({
      corsOrigins: ["https://ok.example"],
    });
    const ok = await app.request("/api/runs", { headers: { origin: "https://ok.example" } });
    expect(ok.headers.get("access-control-allow-origin")).toBe("https://ok.example");
    // A preflight offers the methods the API has.
    const preflight = await app.request("/api/runs", {
      method: "OPTIONS",
      headers: { origin: "https://ok.example", "access-control-request-method": "POST" },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-methods")).toBe("GET,HEAD,POST");
  });
});

describe.each(ENGINES)("idempotent submit on %s", (engine) => {
  const h = useApiHarness(engine, {}, { each: true });

  it("returns the same run for the same key and body, 422 for the same key with another body", async () => {
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
    // Said of the key the client sent, not of the hash the DB keeps of it.
    expect(other.body.error).toMatchObject({
      message: "this Idempotency-Key was used with a different request body",
    });
    const bad = await post(valid, "");
    expect(bad.status).toBe(400);
  });
});
