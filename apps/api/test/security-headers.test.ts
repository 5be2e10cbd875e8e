import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EVERY_ANSWER, PAGE_POLICY } from "../src/security-headers";
import { useApiHarness, VALID_RUN } from "./api-harness";

// The headers as a browser receives them: `looprun api` serves the app with @hono/node-server,
// and the middleware writes the headers every answer carries on Node's response (merged with
// the answer's own when its head is written); `app.request()` has no Node response, and gets
// them on the Response. Both are checked, each header exactly once.

/** What every answer must carry, each once (a header sent twice arrives joined by ", "). */
function expectEveryAnswersHeaders(headers: Headers, what: string) {
  for (const [name, value] of EVERY_ANSWER)
    expect(headers.get(name), `${what}: ${name}`).toBe(value);
  expect(headers.get("strict-transport-security"), what).toBeNull();
}

function expectPageHeaders(headers: Headers, what: string) {
  expect(headers.get("content-type"), what).toContain("text/html");
  expect(headers.get("content-security-policy"), what).toBe(PAGE_POLICY);
  expect(headers.get("x-frame-options"), what).toBe("DENY");
}

function expectNoPageHeaders(headers: Headers, what: string) {
  expect(headers.get("content-type"), what).not.toContain("text/html");
  expect(headers.get("content-security-policy"), what).toBeNull();
  expect(headers.get("x-frame-options"), what).toBeNull();
}

describe("security headers", () => {
  const h = useApiHarness();
  let server: Server;
  let url: string;
  let runId: string;
  beforeAll(async () => {
    server = serve({ fetch: h.app.fetch, hostname: "127.0.0.1", port: 0 }) as Server;
    await new Promise<void>((resolve) => server.once("listening", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const created = await h.request("POST", "/api/runs", VALID_RUN);
    expect(created.status).toBe(202);
    runId = created.body.id;
  });
  afterAll(async () => {
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  });

  const pages = () => ["/", `/runs/${runId}`, "/stats", "/runs/NOPE"];
  const answers = () => [
    "/api/runs",
    `/api/runs/${runId}`,
    "/api/runs/NOPE",
    "/healthz",
    "/dashboard/assets/run.js",
  ];

  /** Every page and answer above, got through `get`: each carries what it must, once. */
  async function expectAll(get: (path: string) => Promise<Response>) {
    for (const path of pages()) {
      const res = await get(path);
      await res.text();
      expectEveryAnswersHeaders(res.headers, path);
      expectPageHeaders(res.headers, path);
    }
    for (const path of answers()) {
      const res = await get(path);
      await res.text();
      expectEveryAnswersHeaders(res.headers, path);
      expectNoPageHeaders(res.headers, path);
    }
  }

  it("over HTTP: every answer carries them; pages also carry their policy and may not be framed", async () => {
    await expectAll((path) => fetch(url + path));
    // A submit (202), a refused one (400) and an event stream, whose head is written first.
    const submitted = await fetch(`${url}/api/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...VALID_RUN, sessionId: "headers-over-http" }),
    });
    expect(submitted.status).toBe(202);
    expect(submitted.headers.get("content-type")).toContain("application/json");
    expectEveryAnswersHeaders(submitted.headers, "POST /api/runs");
    await submitted.text();
    const refused = await fetch(`${url}/api/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(refused.status).toBe(400);
    expectEveryAnswersHeaders(refused.headers, "POST /api/runs (400)");
    await refused.text();
    const stream = await fetch(`${url}/api/runs/stream`);
    expect(stream.headers.get("content-type")).toContain("text/event-stream");
    expectEveryAnswersHeaders(stream.headers, "/api/runs/stream");
    await stream.body?.cancel();
  });

  it("through app.request() (no Node response): the same headers", async () => {
    await expectAll(async (path) => h.app.request(path));
    // Behind a token: the sign-in form, and the form again after a wrong token (401).
    const signIn = h.appWith({ apiToken: "a-token-of-forty-characters-0123456789ab" });
    const form = await signIn.request("/login");
    expect(form.status).toBe(200);
    const wrong = await signIn.request("/login", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: "http://localhost" },
      body: "token=wrong",
    });
    expect(wrong.status).toBe(401);
    for (const [what, res] of [
      ["GET /login", form],
      ["POST /login (wrong token)", wrong],
    ] as const) {
      expectEveryAnswersHeaders(res.headers, what);
      expectPageHeaders(res.headers, what);
    }
  });
});
