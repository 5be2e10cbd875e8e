import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cappedFetch, ReplyTooLargeError } from "../../src/tools/capped-fetch";
import { drainedOrClosed } from "./helpers";

let http: Server;
let base: string;
/** Bytes each reply got written before its client went away (or all of it). */
const written = new Map<string, number>();

/** Writes `parts` one after another, stopping when the client closes the connection. */
async function stream(res: ServerResponse, key: string, parts: string[]): Promise<void> {
  let sent = 0;
  for (const part of parts) {
    if (res.destroyed) break;
    const drained = res.write(part);
    sent += Buffer.byteLength(part);
    if (!drained) await drainedOrClosed(res);
  }
  written.set(key, sent);
  res.end();
}

beforeAll(async () => {
  http = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    const key = url.searchParams.get("key") ?? "";
    const bytes = Number(url.searchParams.get("bytes") ?? "0");
    if (url.pathname === "/json") {
      res.writeHead(200, { "content-type": "application/json" });
      const chunk = "x".repeat(1024);
      void stream(
        res,
        key,
        Array.from({ length: Math.ceil(bytes / 1024) }, () => chunk),
      );
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream" });
    const event = (size: number, eol: string) =>
      `event: message${eol}data: ${"y".repeat(size)}${eol}${eol}`;
    if (url.pathname === "/events") {
      // Many small events, LF and CRLF ones, each line break split across writes at times.
      const parts: string[] = [];
      for (let i = 0; i < 50; i++) {
        const text = event(900, i % 2 === 0 ? "\n" : "\r\n");
        parts.push(text.slice(0, -1), text.slice(-1));
      }
      void stream(res, key, parts);
      return;
    }
    void stream(res, key, [event(bytes, "\n")]);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
});

afterAll(async () => {
  http.closeAllConnections();
  await new Promise((resolve) => http.close(resolve));
});

describe("cappedFetch", () => {
  const capped = cappedFetch(4096);

  it("passes a JSON reply up to the cap, and stops reading one past it", async () => {
    expect((await (await capped(`${base}/json?bytes=4096`)).text()).length).toBe(4096);
    const reply = await capped(`${base}/json?bytes=${64 * 1024 * 1024}&key=big`);
    const reading = reply.text();
    await expect(reading).rejects.toBeInstanceOf(ReplyTooLargeError);
    await expect(reading).rejects.toThrow("the server's reply passed 4096 bytes");
    // The rest of the 64 MiB was never sent: the connection was closed.
    await expect.poll(() => written.get("big")).toBeLessThan(8 * 1024 * 1024);
  });

  it("counts an event stream event by event: many small events pass, one past the cap does not", async () => {
    const all = await (await capped(`${base}/events`)).text();
    expect(all.length).toBeGreaterThan(40_000);
    expect(all.match(/event: message/g)).toHaveLength(50);
    await expect((await capped(`${base}/one-event?bytes=5000`)).text()).rejects.toBeInstanceOf(
      ReplyTooLargeError,
    );
    expect((await (await capped(`${base}/one-event?bytes=3000`)).text()).length).toBeGreaterThan(
      3000,
    );
  });
});
