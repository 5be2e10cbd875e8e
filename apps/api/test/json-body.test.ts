import { request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jsonBody, jsonPieces, PIECE_CHARS } from "../src/json-body";

// jsonBody answers as c.json would, byte for byte, served as `looprun api` serves
// (@hono/node-server, real HTTP): small bodies as one string, large ones from pieces.

const event = (seq: number) => ({
  seq,
  type: seq % 2 ? "agent_started" : "validation_failed",
  at: new Date(1_800_000_000_000 + seq * 100).toISOString(),
  data: { elapsedMs: seq * 100, remainingIterations: 3, iteration: seq >> 2, note: undefined },
});

const VALUES: Record<string, Record<string, unknown>> = {
  empty: {},
  "an empty list": { items: [] },
  "a small page": { items: [event(1), event(2)], nextCursor: null },
  "a 1000-event page": { items: Array.from({ length: 1000 }, (_, i) => event(i + 1)) },
  "a list between fields, undefined fields left out": {
    id: "s1",
    skipped: undefined,
    createdAt: "2026-11-28T00:00:00.000Z",
    runs: Array.from({ length: 300 }, (_, i) => ({ id: `r${i}`, task: "x".repeat(100) })),
    activeRunId: null,
    after: { nested: [1, 2, { deep: true }] },
  },
  "items JSON cannot hold, as JSON.stringify writes them": {
    items: [undefined, () => 1, Number.NaN, "ok", null, [undefined]],
  },
  "text beyond ASCII across pieces": {
    items: Array.from({ length: 2000 }, (_, i) => ({
      i,
      text: `é ✓ 🧪 \u2028 "quoted" \\ \n ${"\ud800"} #${i}`,
    })),
    nextCursor: "01J0000000000000000000000Z",
  },
};

let server: Server;
let url: string;

beforeAll(async () => {
  const app = new Hono();
  app.get("/:name", (c) => jsonBody(c, VALUES[c.req.param("name")] ?? {}));
  server = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }) as Server;
  await new Promise<void>((resolve) => server.once("listening", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

function get(
  path: string,
): Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (part: Buffer) => parts.push(part));
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts) }),
      );
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

describe("jsonBody", () => {
  for (const [name, value] of Object.entries(VALUES)) {
    it(`answers ${name} with the bytes c.json would`, async () => {
      const res = await get(`/${encodeURIComponent(name)}`);
      const expected = Buffer.from(JSON.stringify(value), "utf8");
      expect(res.status).toBe(200);
      expect(res.headers["content-type"]).toBe("application/json");
      expect(res.headers["content-length"]).toBe(String(expected.length));
      expect(res.body.equals(expected)).toBe(true);
    });
  }

  it("holds a large answer as pieces of about 16 K characters, a small one as one", () => {
    for (const [name, value] of Object.entries(VALUES)) {
      const pieces = jsonPieces(value);
      const whole = JSON.stringify(value);
      expect(pieces.join(""), name).toBe(whole);
      if (whole.length < PIECE_CHARS) expect(pieces.length, name).toBe(1);
      if (whole.length >= 2 * PIECE_CHARS) expect(pieces.length, name).toBeGreaterThan(1);
      // No piece grows much past the size: one item at most is added after it is reached.
      for (const piece of pieces) expect(piece.length, name).toBeLessThan(PIECE_CHARS + 1000);
    }
    expect(jsonPieces(VALUES["a 1000-event page"] ?? {}).length).toBeGreaterThan(8);
  });
});
