import type { ServerResponse } from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";

export { isAlive, removeDir, tempDir, waitFor } from "../support";

/** A real MCP client connected to `server` through the SDK's linked in-memory transports. */
export async function connectInMemory(server: McpServer): Promise<Client> {
  const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
  await server.connect(serverTransport);
  const client = new Client({ name: "test", version: "0.0.0" });
  await client.connect(clientTransport);
  return client;
}

/** The text of a tool result's content, joined. */
export function textOf(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content.map((c) => c.text ?? "").join("\n");
}

/** Absolute path of a file of the monorepo, from this test file. */
export function repoPath(relative: string): string {
  return new URL(`../../../../${relative}`, import.meta.url).pathname;
}

/**
 * Resolves once a test server's full write buffer drains or its client goes away, whichever
 * comes first; the other listener goes with it (a reply written in many pieces would pile up
 * one per full buffer: MaxListenersExceededWarning).
 */
export function drainedOrClosed(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done).off("close", done);
      resolve();
    };
    res.once("drain", done).once("close", done);
  });
}
