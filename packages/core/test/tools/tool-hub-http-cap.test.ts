import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_HTTP_REPLY_BYTES } from "../../src/tools/capped-fetch";
import { ToolHub } from "../../src/tools/index";
import { drainedOrClosed } from "./helpers";

// A run names its MCP servers' urls: one may answer a tool call with far more than any
// message should hold. The SDK reads a reply whole; the hub reads no more than the cap of it.

const HUGE_BYTES = 200 * 1024 * 1024;
let http: Server;
let url: string;
let hugeWritten = 0;

async function readJson(req: IncomingMessage): Promise<{ id?: number; method?: string }> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

/** A minimal Streamable HTTP MCP server (JSON replies, no session) with one tool, `huge`. */
beforeAll(async () => {
  http = createServer(async (req, res) => {
    if (req.method !== "POST") {
      res.writeHead(405).end();
      return;
    }
    const message = await readJson(req);
    const reply = (result: unknown) =>
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ jsonrpc: "2.0", id: message.id, result }));
    switch (message.method) {
      case "initialize":
        return reply({
          protocolVersion: "2025-06-18",
          capabilities: { tools: {} },
          serverInfo: { name: "huge", version: "1" },
        });
      case "tools/list":
        return reply({
          tools: ["huge", "huge_event"].map((name) => ({ name, inputSchema: { type: "object" } })),
        });
      case "tools/call": {
        // huge: one JSON body; huge_event: an event stream of one event, as large.
        const events = (message as { params?: { name?: string } }).params?.name === "huge_event";
        res.writeHead(200, { "content-type": events ? "text/event-stream" : "application/json" });
        if (events) res.write("event: message\ndata: ");
        res.write(
          `{"jsonrpc":"2.0","id":${message.id},"result":{"content":[{"type":"text","text":"`,
        );
        const chunk = "z".repeat(1024 * 1024);
        for (let sent = 0; sent < HUGE_BYTES && !res.destroyed; sent += chunk.length) {
          if (!res.write(chunk)) {
            await drainedOrClosed(res);
          }
          hugeWritten = sent + chunk.length;
        }
        if (!res.destroyed) res.end(events ? '"}]}}\n\n' : '"}]}}');
        return;
      }
      default:
        res.writeHead(202).end();
        return;
    }
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
});

afterAll(async () => {
  http.closeAllConnections();
  await new Promise((resolve) => http.close(resolve));
});

describe("ToolHub over Streamable HTTP, a reply past the cap", () => {
  it("fails the call as data, reading no more of the reply than the cap", async () => {
    const hub = await ToolHub.connect([{ name: "big", url }]);
    try {
      const result = await hub.call("big__huge", {});
      expect(result.isError).toBe(true);
      expect(result.result).toContain(`the server's reply passed ${MAX_HTTP_REPLY_BYTES} bytes`);
      // The server could not write the rest: the client stopped reading and closed.
      expect(hugeWritten).toBeLessThan(HUGE_BYTES / 2);
    } finally {
      await hub.close();
    }
  });

  it("fails the call of an event too large at once, closing the connection (not at its timeout)", async () => {
    hugeWritten = 0;
    // A timeout longer than the test's: the call must end because the event was cut.
    const hub = await ToolHub.connect([{ name: "big", url }], { requestTimeoutMs: 600_000 });
    try {
      const result = await hub.call("big__huge_event", {});
      expect(result).toMatchObject({
        isError: true,
        result: `MCP server "big" failed huge_event: the server's reply passed ${MAX_HTTP_REPLY_BYTES} bytes (a message of an MCP server is at most that): not read further; its connection was closed`,
      });
      expect(hugeWritten).toBeLessThan(HUGE_BYTES / 2);
      // The server's tools are gone for the rest of the hub's life, as a stdio server's are.
      expect((await hub.call("big__huge", {})).result).toBe(
        `MCP server "big" is not connected any more (the server's reply passed ${MAX_HTTP_REPLY_BYTES} bytes (a message of an MCP server is at most that): not read further)`,
      );
    } finally {
      await hub.close();
    }
  });
});
