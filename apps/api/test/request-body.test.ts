import { request as httpRequest, type Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { readBodyText, refuseLargeBodiesEarly } from "../src/request-body";
import { useApiHarness } from "./api-harness";

// Bodies as `looprun api` receives them: the app served by @hono/node-server, which hands the
// handlers Node's own request (request-body.ts reads it directly), over real HTTP — with a
// length, or chunked (no length: Hono's own reader counts it).

type Served = { url: string; close(): Promise<void> };

const LIMIT = 64 * 1024;

async function served(fetch: (request: Request, env: unknown) => Response | Promise<Response>) {
  const server = serve({ fetch, hostname: "127.0.0.1", port: 0 }) as Server;
  refuseLargeBodiesEarly(server, LIMIT);
  await new Promise<void>((resolve) => server.once("listening", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  } satisfies Served;
}

/** POSTs `body`, whole with its length or in `chunks` pieces without one. */
function post(
  url: string,
  body: string,
  chunks = 0,
): Promise<{ status: number; body: { [key: string]: unknown } }> {
  const bytes = Buffer.from(body, "utf8");
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(chunks > 0
            ? { "transfer-encoding": "chunked" }
            : { "content-length": String(bytes.length) }),
        },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on("data", (part: Buffer) => parts.push(part));
        res.on("end", () => {
          const text = Buffer.concat(parts).toString("utf8");
          resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : {} });
        });
      },
    );
    // A server that answers before reading everything may close its side meanwhile.
    req.on("error", reject);
    if (chunks === 0) {
      req.end(bytes);
      return;
    }
    // Cut anywhere, multi-byte characters included: the body is decoded once whole.
    const size = Math.ceil(bytes.length / chunks);
    for (let at = 0; at < bytes.length; at += size) req.write(bytes.subarray(at, at + size));
    req.end();
  });
}

describe("request bodies over HTTP (@hono/node-server)", () => {
  const h = useApiHarness("sqlite", { bodyLimitBytes: LIMIT });
  let api: Served;
  beforeAll(async () => {
    api = await served(h.app.fetch);
  });
  afterAll(async () => {
    await api?.close();
  });

  const run = (task: string, sessionId: string) =>
    JSON.stringify({
      task,
      sessionId,
      agent: { type: "command", command: "true" },
      testCommand: "true",
    });

  it("accepts a run whose body comes with its length, and one that comes in chunks", async () => {
    const task = "compte jusqu'à trois — ✓ ünïcödé";
    const whole = await post(`${api.url}/api/runs`, run(task, "with-length"));
    const chunked = await post(`${api.url}/api/runs`, run(task, "chunked"), 7);
    expect([whole.status, chunked.status]).toEqual([202, 202]);
    for (const id of [whole.body.id, chunked.body.id]) {
      expect((await h.repo.getRun(String(id)))?.spec.task).toBe(task);
    }
  });

  it("answers 413 payload_too_large for a body over the limit, with or without its length, and stores nothing", async () => {
    const before = (await h.repo.listRuns({ limit: 100 })).items.length;
    const big = run("x".repeat(LIMIT), "too-large");
    for (const chunks of [0, 4]) {
      const res = await post(`${api.url}/api/runs`, big, chunks);
      expect(res.status).toBe(413);
      expect((res.body.error as { code: string }).code).toBe("payload_too_large");
    }
    expect((await h.repo.listRuns({ limit: 100 })).items).toHaveLength(before);
  });

  it("refuses a body over the limit before it is sent when the client asks first (Expect: 100-continue)", async () => {
    const ask = (bytes: number) =>
      new Promise<{ status: number; continued: boolean; body: string }>((resolve, reject) => {
        let continued = false;
        const body = run("x".repeat(bytes), `expect-${bytes}`);
        const req = httpRequest(`${api.url}/api/runs`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "content-length": String(Buffer.byteLength(body)),
            expect: "100-continue",
          },
        });
        req.on("continue", () => {
          continued = true;
          req.end(body);
        });
        req.on("response", (res) => {
          const parts: Buffer[] = [];
          res.on("data", (part: Buffer) => parts.push(part));
          res.on("end", () =>
            resolve({
              status: res.statusCode ?? 0,
              continued,
              body: Buffer.concat(parts).toString(),
            }),
          );
        });
        req.on("error", reject);
        req.flushHeaders();
      });
    const big = await ask(LIMIT * 4);
    expect(big.status).toBe(413);
    expect(big.continued).toBe(false);
    expect(JSON.parse(big.body).error.code).toBe("payload_too_large");
    const small = await ask(10);
    expect(small).toMatchObject({ status: 202, continued: true });
  });

  it("answers 400 naming the body when it is not JSON", async () => {
    const res = await post(`${api.url}/api/runs`, '{"task": "unterminated');
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({
      code: "invalid_request",
      message: "body: body must be valid JSON",
    });
  });
});

describe("readBodyText", () => {
  it("reads a body once, however often a handler asks for it", async () => {
    const app = new Hono();
    app.post("/echo", async (c) =>
      c.json({ first: await readBodyText(c), again: await readBodyText(c) }),
    );
    const echo = await served(app.fetch);
    try {
      expect((await post(`${echo.url}/echo`, '"ö"')).body).toEqual({ first: '"ö"', again: '"ö"' });
      expect((await post(`${echo.url}/echo`, '"ö"', 2)).body).toEqual({
        first: '"ö"',
        again: '"ö"',
      });
    } finally {
      await echo.close();
    }
  });
  it("gives up on a body whose client went away before sending all of it, leaving nothing waiting", async () => {
    const outcomes: string[] = [];
    const app = new Hono();
    app.post("/echo", async (c) => {
      try {
        outcomes.push(`read ${await readBodyText(c)}`);
      } catch (error) {
        outcomes.push(`refused: ${(error as Error).message}`);
      }
      return c.json({});
    });
    const echo = await served(app.fetch);
    try {
      const { port } = new URL(echo.url);
      const socket = connect(Number(port), "127.0.0.1");
      await new Promise((resolve) => socket.once("connect", resolve));
      socket.write('POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{"half":');
      await vi.waitFor(() => expect(outcomes).toEqual([]), { timeout: 200 });
      socket.destroy();
      await vi.waitFor(() => expect(outcomes).toEqual([expect.stringMatching(/^refused: /)]), {
        timeout: 10_000,
      });
    } finally {
      await echo.close();
    }
  });
});
