import { beforeAll, describe, expect, it } from "vitest";
import { PRESETS } from "../src/dashboard/presets";
import { useApiHarness, VALID_RUN } from "./api-harness";

describe("dashboard pages and assets", () => {
  const h = useApiHarness();
  let runId: string;
  beforeAll(async () => {
    const created = await h.request("POST", "/api/runs", VALID_RUN);
    expect(created.status).toBe(202);
    runId = created.body.id;
  });

  it("serves the runs page with the submit form and its presets", async () => {
    const res = await h.app.request("/");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/html");
    const html = await res.text();
    expect(html.startsWith("<!doctype html>")).toBe(true);
    expect(html).toContain('id="runs-table"');
    expect(html).toContain('id="submit-form"');
    for (const preset of PRESETS) expect(html).toContain(`data-preset="${preset.id}"`);
    const labels = PRESETS.map((p) => p.label.toLowerCase());
    expect(labels).toEqual(
      expect.arrayContaining([
        "review approved",
        "review sends it back once",
        "persistent blocking until the iteration budget runs out",
        "time budget runs out",
        "validation fails then recovers",
        "legacy maxattempts input",
      ]),
    );
  });

  it("serves a run's page", async () => {
    const res = await h.app.request(`/runs/${runId}`);
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toContain(`data-run-id="${runId}"`);
    expect(html).toContain('id="budget"');
    expect(html).toContain('id="review"');
  });

  it("answers 404 for a run that does not exist, escaping what comes from the URL", async () => {
    const res = await h.app.request(`/runs/${encodeURIComponent('x"><script>alert(1)</script>')}`);
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toContain("text/html");
    const html = await res.text();
    expect(html).not.toContain("<script>alert(1)</script>");
    expect(html).toContain("&lt;script&gt;");
    expect(html).toContain('id="no-such-run"');
    expect(html).not.toContain("data-run-id");
    // A run id of the right shape that no run has: the same.
    const unknown = await h.app.request(
      `/runs/${runId.slice(0, -1)}${runId.endsWith("0") ? "1" : "0"}`,
    );
    expect(unknown.status).toBe(404);
  });

  it("serves every asset the pages reference, from the repository (no CDN)", async () => {
    const pages = await Promise.all(
      ["/", `/runs/${runId}`].map(async (p) => (await h.app.request(p)).text()),
    );
    const refs = new Set(
      pages.flatMap((html) =>
        [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1] as string),
      ),
    );
    const external = [...refs].filter((r) => /^(https?:)?\/\//.test(r));
    expect(external).toEqual([]);
    const assets = [...refs].filter((r) => r.startsWith("/dashboard/assets/"));
    expect(assets.length).toBeGreaterThanOrEqual(3);
    for (const asset of [
      ...assets,
      "/dashboard/assets/api.js",
      "/dashboard/assets/format.js",
      "/dashboard/assets/login.js",
      "/dashboard/assets/iterations.js",
      "/dashboard/assets/events.js",
      "/dashboard/assets/submit-form.js",
    ]) {
      const res = await h.app.request(asset);
      expect(res.status, asset).toBe(200);
      expect(res.headers.get("content-type"), asset).toMatch(/^text\/(javascript|css)/);
    }
    expect((await h.app.request("/dashboard/assets/nope.js")).status).toBe(404);
    expect((await h.app.request("/dashboard/assets/..%2Fdashboard-auth.ts")).status).toBe(404);
  });

  it("without API_TOKEN, /login sends the visitor on to this site only", async () => {
    for (const next of ["/\t/evil.example/", "/\n/evil.example/", "//evil.example/"]) {
      const res = await h.app.request(`/login?next=${encodeURIComponent(next)}`);
      expect(res.status, JSON.stringify(next)).toBe(302);
      expect(res.headers.get("location"), JSON.stringify(next)).toBe("/");
    }
    const res = await h.app.request(`/login?next=${encodeURIComponent("/runs/abc?x=1")}`);
    expect(res.headers.get("location")).toBe("/runs/abc?x=1");
  });

  describe("with API_TOKEN", () => {
    const token = "dashboard-token-0123456789";
    const secured = () =>
      h.appWith({
        apiToken: token,
      });

    it("sends a visitor without the cookie to /login, and back after signing in", async () => {
      const app = secured();
      const page = await app.request("/runs/abc?x=1");
      expect(page.status).toBe(302);
      expect(page.headers.get("location")).toBe(
        `/login?next=${encodeURIComponent("/runs/abc?x=1")}`,
      );
      const form = await app.request("/login?next=%2Fruns%2Fabc");
      expect(form.status).toBe(200);
      expect(await form.text()).toContain('name="token"');

      const login = (value: string, next = "/runs/abc", headers: Record<string, string> = {}) =>
        app.request("/login", {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
          body: new URLSearchParams({ token: value, next }).toString(),
        });
      const wrong = await login("not-the-token");
      expect(wrong.status).toBe(401);
      expect(wrong.headers.get("set-cookie")).toBeNull();
      expect(await wrong.text()).toContain("That token is not the API_TOKEN of this API.");

      const right = await login(token);
      expect(right.status).toBe(303);
      expect(right.headers.get("location")).toBe("/runs/abc");
      const setCookie = right.headers.get("set-cookie") ?? "";
      expect(setCookie).toMatch(/^looprun_dashboard=[0-9a-f]{64};/);
      expect(setCookie).toContain("HttpOnly");
      expect(setCookie).toContain("SameSite=Strict");
      expect(setCookie).not.toContain(token);
      // Over plain http the cookie cannot be Secure; behind a proxy that ended TLS it is.
      expect(setCookie).not.toContain("Secure");
      const proxied = await login(token, "/", { "x-forwarded-proto": "https" });
      expect(proxied.headers.get("set-cookie")).toContain("Secure");
      const cookie = setCookie.split(";")[0] as string;
      const inside = await app.request(`/runs/${runId}`, { headers: { cookie } });
      expect(inside.status).toBe(200);
      expect(await inside.text()).toContain('data-auth="on"');
      // The cookie opens pages only: the API still wants the bearer token.
      expect((await app.request("/api/runs", { headers: { cookie } })).status).toBe(401);
      // Never a redirect elsewhere.
      expect((await login(token, "//evil.example/")).headers.get("location")).toBe("/");

      const out = await app.request("/logout", { method: "POST", headers: { cookie } });
      expect(out.status).toBe(303);
      expect(out.headers.get("set-cookie")).toMatch(/^looprun_dashboard=;.*Max-Age=0/);
    });

    it("sends a sign-in back to this site only, whatever `next` holds", async () => {
      const app = secured();
      const hostile = [
        "//evil.example/",
        "/\\evil.example/",
        "/\t/evil.example/",
        "/\n/evil.example/",
        "/\r/evil.example/",
        "/.//evil.example/",
        "/x/..//evil.example/",
        "http://evil.example/",
        "evil.example",
      ];
      for (const next of hostile) {
        const form = await app.request(`/login?next=${encodeURIComponent(next)}`);
        expect(form.status, JSON.stringify(next)).toBe(200);
        expect(await form.text(), JSON.stringify(next)).toContain('name="next" value="/"');
        const login = await app.request("/login", {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ token, next }).toString(),
        });
        expect(login.status, JSON.stringify(next)).toBe(303);
        expect(login.headers.get("location"), JSON.stringify(next)).toBe("/");
      }
      // A path of this site comes back as a browser would request it.
      const spaced = await app.request("/login", {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ token, next: "/runs/a b?x=1" }).toString(),
      });
      expect(spaced.headers.get("location")).toBe("/runs/a%20b?x=1");
    });

    it("leaves the assets open (they hold no data)", async () => {
      expect((await secured().request("/dashboard/assets/style.css")).status).toBe(200);
    });
  });
});
