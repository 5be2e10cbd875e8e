import { realpath, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { removeDir, repoPath, tempDir, textOf } from "./helpers";

let root: string;
beforeEach(async () => {
  root = await realpath(await tempDir());
  await writeFile(join(root, "README.md"), "# hi\n");
});
afterEach(async () => {
  await removeDir(root);
});

describe("looprun mcp workspace DIR", () => {
  it("serves the workspace server on stdio to any MCP client", async () => {
    const client = new Client({ name: "test", version: "0.0.0" });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [repoPath("apps/cli/bin/looprun.js"), "mcp", "workspace", root],
        env: { API_TOKEN: "must-not-leak", LOOPRUN_VISIBLE: "1" },
        stderr: "pipe",
      }),
    );
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual(
        [
          "edit_file",
          "list_directory",
          "read_text_file",
          "run_command",
          "search_files",
          "write_file",
        ].sort(),
      );
      const listing = await client.callTool({ name: "list_directory", arguments: { path: "." } });
      expect(textOf(listing)).toBe("[FILE] README.md");
      // Commands get the worker's minimal environment, not the CLI's secrets.
      const env = textOf(
        await client.callTool({ name: "run_command", arguments: { command: "env" } }),
      );
      expect(env).toContain("LOOPRUN_VISIBLE=1");
      expect(env).not.toContain("API_TOKEN");
    } finally {
      await client.close();
    }
  });
});
