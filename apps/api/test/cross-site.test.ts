import { describe, expect, it } from "vitest";
import { useApiHarness, VALID_RUN as valid } from "./api-harness";

// What keeps a web page from using a looprun through its visitor's browser: cross-site POSTs
// (cross-site.ts), and, without API_TOKEN, host names that are not this machine's (DNS
// rebinding). In a real browser: tests/e2e-cross-site.test.ts.

describe("cross-site requests", () => {
  const h = useApiHarness("sqlite", {}, { each: true });

  it("refuses a POST that a page of another origin sent, and nothing else", async () => {
    const app = h.appWith({
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
      { "sec-fetch-site": "same-site", origin: "http://localhost:3000" },
      { "sec-fetch-site": "cross-site", origin: "http://127.0.0.1:8787" },
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
      // The browser's word wins over a Host a proxy rewrote (nginx's default).
      { "sec-fetch-site": "same-origin", origin: "https://looprun.example" },
      { "sec-fetch-site": "same-site", origin: "https://ok.example" },
      // No Sec-Fetch-Site (an older browser): Origin against Host, any case, default port.
      { origin: "HTTP://127.0.0.1:8787" },
      { origin: "http://LOCALHOST:8787", host: "localhost:8787" },
      { origin: "http://localhost", host: "localhost:80" },
      { origin: "https://looprun.example", "x-forwarded-host": "looprun.example:443" },
    ];
    for (const [i, headers] of accepted.entries()) {
      const res = await post(headers, `accepted-${i}`);
      expect(res.status, JSON.stringify(headers)).toBe(202);
    }
  });
});

describe("host names, without API_TOKEN", () => {
  const h = useApiHarness("sqlite", {}, { each: true });

  it("answers only a loopback name or a CORS origin's host, on every route; any host with a token", async () => {
    const corsOrigins = ["https://ok.example"];
    const open = h.appWith({ corsOrigins });
    const get = (app: typeof open, path: string, host: string, token?: string) =>
      app.request(`http://${host}${path}`, {
        headers: { host, ...(token ? { authorization: `Bearer ${token}` } : {}) },
      });
    // A page of rebind.attacker.example, its name pointed at 127.0.0.1: same-origin to the
    // browser, which sends its own host name.
    for (const path of ["/api/runs", "/", "/healthz", "/metrics"]) {
      const res = await get(open, path, "rebind.attacker.example:8787");
      expect(res.status, path).toBe(403);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("forbidden");
    }
    const posted = await open.request("http://rebind.attacker.example:8787/api/runs", {
      method: "POST",
      headers: {
        host: "rebind.attacker.example:8787",
        "sec-fetch-site": "same-origin",
        "content-type": "application/json",
      },
      body: JSON.stringify(valid),
    });
    expect(posted.status).toBe(403);
    expect((await h.repo.listRuns({ limit: 10 })).items).toHaveLength(0);
    for (const host of [
      "127.0.0.1:8787",
      "localhost:8787",
      "[::1]:8787",
      "127.0.0.2",
      "ok.example",
    ]) {
      expect((await get(open, "/api/runs", host)).status, host).toBe(200);
    }
    // With a token, the token decides: any host name.
    const token = "a-token-of-some-length";
    const guarded = h.appWith({ corsOrigins, apiToken: token });
    expect((await get(guarded, "/api/runs", "looprun.example", token)).status).toBe(200);
  });
});
