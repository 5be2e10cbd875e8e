import { describe, expect, inject, it } from "vitest";
import { apiHarness, ENGINES, VALID_RUN as valid } from "./api-harness";

// What guards the API: readiness with the database or Redis gone, the token, the body and
// rate limits, CORS and cross-site requests, idempotency keys.

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
        expect(res.headers.get("www-authenticate")).toBe('Bearer realm="looprun"');
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

describe("cross-site requests", () => {
  it("refuses a POST that a page of another origin sent, and nothing else", async () => {
    const { createApp } = await import("../src/app");
    const h = await apiHarness(inject("redisUrl"));
    try {
      await h.untilReady();
      const app = createApp({
        repo: h.repo,
        queue: h.queue,
        workspacesRoot: h.workspacesRoot,
        dbHealthy: () => true,
        corsOrigins: ["https://ok.example"],
      });
      const post = async (headers: Record<string, string>, sessionId: string) => {
        const res = await app.request("http://127.0.0.1:8787/api/runs", {
          method: "POST",
          headers: { "content-type": "application/json", host: "127.0.0.1:8787", ...headers },
          body: JSON.stringify({ ...valid, sessionId }),
        });
        return { status: res.status, body: (await res.json()) as { error?: { code: string } } };
      };
      const refused: Record<string, string>[] = [
        { origin: "https://evil.example" },
        { origin: "null" },
        { origin: "http://127.0.0.1:9999" },
        { origin: "https://looprun.example", "x-forwarded-host": "elsewhere.example" },
        { "sec-fetch-site": "cross-site" },
      ];
      for (const headers of refused) {
        const res = await post(headers, "refused");
        expect(res.status, JSON.stringify(headers)).toBe(403);
        expect(res.body.error?.code).toBe("forbidden");
      }
      expect((await h.repo.listRuns({ limit: 10 })).items).toHaveLength(0);
      // Reads are not refused (CORS keeps their answers from other pages).
      const read = await app.request("/api/runs", { headers: { origin: "https://evil.example" } });
      expect(read.status).toBe(200);

      // Accepted: no browser (curl, the CLI), the API's own origin (the dashboard, also behind
      // a proxy that names it), a configured origin, a page of the same site.
      const accepted: Record<string, string>[] = [
        {},
        { origin: "http://127.0.0.1:8787" },
        { origin: "https://looprun.example", "x-forwarded-host": "looprun.example" },
        { origin: "https://ok.example" },
        { "sec-fetch-site": "same-origin" },
      ];
      for (const [i, headers] of accepted.entries()) {
        const res = await post(headers, `accepted-${i}`);
        expect(res.status, JSON.stringify(headers)).toBe(202);
      }
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
