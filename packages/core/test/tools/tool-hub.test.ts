import { existsSync, readFileSync } from "node:fs";
import { mkdir, readFile, realpath, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  FUNCTION_NAME_PATTERN,
  McpConnectError,
  ToolHub,
  workspaceServerLaunch,
} from "../../src/tools/index";
import { isAlive, removeDir, repoPath, tempDir, waitFor } from "./helpers";

const EVERYTHING = repoPath("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const FILESYSTEM = repoPath("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");

let base: string;
let rootA: string;
let rootB: string;
let hub: ToolHub;

function pidIn(file: string): number {
  return Number(readFileSync(file, "utf8").trim());
}

beforeAll(async () => {
  base = await realpath(await tempDir());
  rootA = join(base, "a");
  rootB = join(base, "b");
  await mkdir(rootA);
  await mkdir(rootB);
  await writeFile(join(rootA, "hello.txt"), "hello from a\n");
  hub = await ToolHub.connect([
    // "ws.a" and "ws_a" sanitize to the same prefix: the second must get other names.
    { name: "ws.a", ...workspaceServerLaunch(rootA, { LOOPRUN_GIVEN: "yes" }) },
    { name: "ws_a", ...workspaceServerLaunch(rootB, {}) },
    { name: "everything", command: process.execPath, args: [EVERYTHING, "stdio"] },
    { name: "fs", command: process.execPath, args: [FILESYSTEM, rootA] },
  ]);
});
afterAll(async () => {
  await hub?.close();
  await removeDir(base);
});

describe("ToolHub over real stdio servers", () => {
  it("exposes every tool under a unique, valid function name with Mistral-ready parameters", () => {
    const names = hub.tools.map((t) => t.name);
    expect(new Set(names).size).toBe(names.length);
    for (const tool of hub.tools) {
      expect(tool.name, tool.name).toMatch(FUNCTION_NAME_PATTERN);
      expect(tool.parameters.$schema).toBeUndefined();
      expect(tool.parameters.type).toBe("object");
      expect(tool.parameters.properties).toBeTypeOf("object");
    }
    expect(hub.tool("ws_a__read_text_file")).toMatchObject({
      server: "ws.a",
      tool: "read_text_file",
    });
    expect(hub.tool("ws_a__read_text_file_2")).toMatchObject({
      server: "ws_a",
      tool: "read_text_file",
    });
    expect(hub.tool("everything__get-sum")).toMatchObject({
      server: "everything",
      tool: "get-sum",
    });
    expect(hub.tool("fs__read_text_file")).toMatchObject({ server: "fs", tool: "read_text_file" });
    expect(hub.tool("ws_a__read_text_file")?.parameters).toMatchObject({ required: ["path"] });
  });

  it("calls tools of each server and reports who answered", async () => {
    const sum = await hub.call("everything__get-sum", { a: 2, b: 3 });
    expect(sum).toMatchObject({ isError: false, server: "everything", tool: "get-sum" });
    expect(sum.result).toContain("5");
    expect(sum.durationMs).toBeGreaterThanOrEqual(0);
    // Models send arguments as JSON text.
    const echo = await hub.call("everything__echo", '{"message":"hi there"}');
    expect(echo).toMatchObject({ isError: false, result: "Echo: hi there" });
    const read = await hub.call("ws_a__read_text_file", { path: "hello.txt" });
    expect(read).toMatchObject({ isError: false, result: "hello from a\n", server: "ws.a" });
    const other = await hub.call("ws_a__read_text_file_2", { path: "hello.txt" });
    expect(other).toMatchObject({ isError: true, server: "ws_a" });
    // server-filesystem keeps its command-line directory: the hub declares no roots.
    const allowed = await hub.call("fs__list_allowed_directories", {});
    expect(allowed.result).toContain(rootA);
  });

  it("validates arguments before calling: the server never sees an invalid call", async () => {
    const sum = await hub.call("everything__get-sum", { a: 2 });
    expect(sum.isError).toBe(true);
    expect(sum.result).toContain('missing required argument "b"');
    expect(sum.result).toContain("not called");
    // The server's own validation error reads differently ("Input validation error").
    expect(sum.result).not.toContain("Input validation");

    const write = await hub.call("ws_a__write_file", { path: "never.txt" });
    expect(write).toMatchObject({ isError: true, server: "ws.a", tool: "write_file" });
    expect(write.result).toContain('"content"');
    expect(existsSync(join(rootA, "never.txt"))).toBe(false);

    const wrongType = await hub.call("ws_a__read_text_file", { path: "hello.txt", head: "two" });
    expect(wrongType.isError).toBe(true);
    expect(wrongType.result).toContain('"head" must be');
    const nested = await hub.call("ws_a__edit_file", {
      path: "hello.txt",
      edits: [{ newText: "x" }],
    });
    expect(nested.result).toContain('missing required argument "edits.0.oldText"');
    expect(await readFile(join(rootA, "hello.txt"), "utf8")).toBe("hello from a\n");

    expect((await hub.call("everything__echo", "{not json")).result).toContain("not valid JSON");
    expect((await hub.call("everything__echo", [1, 2])).result).toContain("must be a JSON object");
  });

  it("answers an unknown tool with the list of known ones", async () => {
    const result = await hub.call("read_file", { path: "x" });
    expect(result).toMatchObject({ isError: true, server: "", tool: "read_file" });
    expect(result.result).toContain('unknown tool "read_file"');
    expect(result.result).toContain("ws_a__read_text_file");
    expect(result.result).toContain("everything__get-sum");
    // A made-up name is any text: it is recorded capped (64 characters, never half an emoji).
    const long = `x${"😀".repeat(200)}`;
    const made = await hub.call(long, {});
    expect(made).toMatchObject({ isError: true, server: "" });
    expect(made.tool).toBe(`x${"😀".repeat(63)}…`);
  });

  it("caps results and says how much was cut", async () => {
    const big = "x".repeat(50_000);
    await writeFile(join(rootA, "big.txt"), big);
    const result = await hub.call("ws_a__read_text_file", { path: "big.txt" });
    expect(result.isError).toBe(false);
    expect(result.result.startsWith("x".repeat(20_000))).toBe(true);
    expect(result.result).toContain("[… 30000 of 50000 bytes cut …]");
    expect(result.result.length).toBeLessThan(20_100);
  });

  it("turns tool errors into data", async () => {
    const outside = await hub.call("ws_a__read_text_file", { path: "../b/anything" });
    expect(outside.isError).toBe(true);
    expect(outside.result).toContain("outside the workspace");
    const failing = await hub.call("ws_a__run_command", { command: "exit 7" });
    expect(failing.isError).toBe(true);
    expect(failing.result).toContain("exit code 7");
  });

  it("gives the launched workspace server's commands only the environment it was given", async () => {
    process.env.LOOPRUN_TOOLS_HUB_SECRET = "leaked";
    try {
      // The hub's own process environment is not passed on (only what the launch gives).
      const result = await hub.call("ws_a__run_command", { command: "env" });
      expect(result.isError).toBe(false);
      expect(result.result).toContain("LOOPRUN_GIVEN=yes");
      expect(result.result).not.toContain("LOOPRUN_TOOLS_HUB_SECRET");
    } finally {
      delete process.env.LOOPRUN_TOOLS_HUB_SECRET;
    }
    const other = await hub.call("ws_a__run_command_2", { command: "env" });
    expect(other.result).not.toContain("LOOPRUN_GIVEN");
  });

  it("cancels a call when its signal aborts, killing the command on the server", async () => {
    const controller = new AbortController();
    const pending = hub.call(
      "ws_a__run_command",
      { command: "echo $$ > cancel.pid; sleep 30" },
      controller.signal,
    );
    const pidFile = join(rootA, "cancel.pid");
    await waitFor(
      () => existsSync(pidFile) && readFileSync(pidFile, "utf8").trim() !== "",
      "the command to start",
    );
    const pid = pidIn(pidFile);
    controller.abort();
    const result = await pending;
    expect(result.isError).toBe(true);
    expect(result.result).toContain("cancelled");
    await waitFor(() => !isAlive(pid), "the cancelled command to be killed");
    const already = await hub.call("everything__echo", { message: "x" }, AbortSignal.abort());
    expect(already).toMatchObject({ isError: true });
    expect(already.result).toContain("cancelled before it started");
  });
});

describe("ToolHub failures", () => {
  it("reports a request timeout as data", async () => {
    const root = await realpath(await tempDir());
    const slow = await ToolHub.connect([{ name: "ws", ...workspaceServerLaunch(root, {}) }], {
      requestTimeoutMs: 1000,
    });
    try {
      expect((await slow.call("ws__list_directory", { path: "." })).isError).toBe(false);
      const result = await slow.call("ws__run_command", { command: "echo $$ > t.pid; sleep 30" });
      expect(result.isError).toBe(true);
      expect(result.result).toContain("did not answer run_command within 1000 ms");
      // The timed-out request is cancelled on the server, which kills the command.
      const pidFile = join(root, "t.pid");
      await waitFor(
        () => existsSync(pidFile) && readFileSync(pidFile, "utf8").trim() !== "",
        "the command to have started",
      );
      await waitFor(() => !isAlive(pidIn(pidFile)), "the timed-out command to be killed");
    } finally {
      await slow.close();
      await removeDir(root);
    }
  });

  it("reports a server that dies during a call as data, then as not connected", async () => {
    const root = await realpath(await tempDir());
    const dying = await ToolHub.connect([{ name: "ws", ...workspaceServerLaunch(root, {}) }]);
    try {
      // The command's parent is the server process.
      const result = await dying.call("ws__run_command", { command: "kill -9 $PPID" });
      expect(result).toMatchObject({ isError: true, server: "ws", tool: "run_command" });
      expect(result.result).toContain('MCP server "ws"');
      const after = await dying.call("ws__list_directory", { path: "." });
      expect(after.isError).toBe(true);
      expect(after.result).toContain("not connected");
    } finally {
      await dying.close();
      await removeDir(root);
    }
  });

  it("close() stops the stdio server processes and the commands they run", async () => {
    const root = await realpath(await tempDir());
    const closing = await ToolHub.connect([{ name: "ws", ...workspaceServerLaunch(root, {}) }]);
    try {
      const server = await closing.call("ws__run_command", { command: "echo $PPID" });
      const serverPid = Number(server.result.split("\n")[1]);
      expect(isAlive(serverPid)).toBe(true);
      const pending = closing.call("ws__run_command", { command: "echo $$ > c.pid; sleep 30" });
      await waitFor(
        () => existsSync(join(root, "c.pid")) && readFileSync(join(root, "c.pid"), "utf8") !== "",
        "start",
      );
      const commandPid = pidIn(join(root, "c.pid"));
      await closing.close();
      expect((await pending).isError).toBe(true);
      await waitFor(() => !isAlive(serverPid), "the server process to exit");
      await waitFor(() => !isAlive(commandPid), "its command to be killed");
      expect((await closing.call("ws__list_directory", { path: "." })).isError).toBe(true);
    } finally {
      await closing.close();
      await removeDir(root);
    }
  });

  it("fails to connect with a McpConnectError naming the server, with its stderr", async () => {
    const missing = await ToolHub.connect([
      { name: "ghost", command: "/nonexistent/mcp-server" },
    ]).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(McpConnectError);
    expect((missing as McpConnectError).server).toBe("ghost");

    const crashing = await ToolHub.connect(
      [
        { name: "ok", command: process.execPath, args: [EVERYTHING, "stdio"] },
        { name: "crash", command: "sh", args: ["-c", "echo 'boom: bad config' >&2; exit 1"] },
      ],
      { connectTimeoutMs: 20_000 },
    ).catch((e: unknown) => e);
    expect(crashing).toBeInstanceOf(McpConnectError);
    expect((crashing as McpConnectError).name).toBe("McpConnectError");
    expect((crashing as McpConnectError).message).toContain('MCP server "crash"');
    expect((crashing as McpConnectError).message).toContain("boom: bad config");
  });

  it("refuses duplicate server names before starting anything", async () => {
    const error = await ToolHub.connect([
      { name: "x", command: "/nonexistent/a" },
      { name: "x", command: "/nonexistent/b" },
    ]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpConnectError);
    expect((error as Error).message).toContain("two servers have this name");
  });
});
