import { randomUUID } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWorkspaceServer, McpConnectError, ToolHub } from "../../src/tools/index";
import { removeDir, tempDir } from "./helpers";

const TOKEN = "test-token";

let root: string;
let http: Server;
let url: string;
const transports = new Map<string, StreamableHTTPServerTransport>();
/** `tools/call` requests that reached the server. */
const received: string[] = [];
/** Session ends (`DELETE`) that reached the server. */
let deletes = 0;

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return chunks.length === 0 ? undefined : JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

/** The workspace server over Streamable HTTP on a loopback port, one MCP session per client, behind a bearer token. */
beforeAll(async () => {
  root = await tempDir();
  await writeFile(join(root, "remote.txt"), "served over http\n");
  http = createServer(async (req, res) => {
    if (req.headers.authorization !== `Bearer ${TOKEN}`) {
      res.writeHead(401, { "content-type": "application/json" }).end('{"error":"unauthorized"}');
      return;
    }
    if (req.method === "DELETE") deletes += 1;
    const body = req.method === "POST" ? await readJson(req) : undefined;
    for (const message of Array.isArray(body) ? body : [body]) {
      const { method, params } = (message ?? {}) as { method?: string; params?: { name?: string } };
      if (method === "tools/call") received.push(params?.name ?? "");
    }
    const sessionId = req.headers["mcp-session-id"];
    let transport = typeof sessionId === "string" ? transports.get(sessionId) : undefined;
    if (!transport) {
      if (typeof sessionId === "string" || req.method !== "POST") {
        res.writeHead(404).end();
        return;
      }
      const created = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          transports.set(id, created);
        },
      });
      await createWorkspaceServer({ root, commandEnv: {} }).connect(created);
      transport = created;
    }
    await transport.handleRequest(req, res, body);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
});

afterAll(async () => {
  await Promise.all([...transports.values()].map((t) => t.close()));
  http.closeAllConnections();
  await new Promise((resolve) => http.close(resolve));
  await removeDir(root);
});

describe("ToolHub over Streamable HTTP", () => {
  it("connects by url with headers, lists and calls tools, and validates before sending", async () => {
    const hub = await ToolHub.connect([
      { name: "remote", url, headers: { Authorization: `Bearer ${TOKEN}` } },
    ]);
    try {
      expect(hub.tools.map((t) => t.name)).toContain("remote__read_text_file");
      const read = await hub.call("remote__read_text_file", { path: "remote.txt" });
      expect(read).toMatchObject({
        isError: false,
        result: "served over http\n",
        server: "remote",
      });
      expect(received).toEqual(["read_text_file"]);

      const invalid = await hub.call("remote__read_text_file", {});
      expect(invalid.isError).toBe(true);
      expect(invalid.result).toContain('missing required argument "path"');
      expect(received).toEqual(["read_text_file"]);

      const outside = await hub.call("remote__read_text_file", { path: "/etc/hostname" });
      expect(outside.isError).toBe(true);
      expect(received).toEqual(["read_text_file", "read_text_file"]);
    } finally {
      await hub.close();
    }
    // Closing the hub ends the session on the server.
    expect(deletes).toBe(1);
  });

  it("fails to connect without the right headers", async () => {
    const error = await ToolHub.connect([{ name: "remote", url }]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpConnectError);
    expect((error as McpConnectError).server).toBe("remote");
  });
});
