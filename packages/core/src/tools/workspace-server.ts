import { isUtf8 } from "node:buffer";
import { type FileHandle, mkdir, realpath } from "node:fs/promises";
import { dirname, relative } from "node:path";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { runCommand } from "../process/run-command";
import { messageOf } from "../util/errors";
import { confinePath } from "./confine-path";
import { openConfined } from "./confined-open";
import { PathConfinementError, ToolFailure } from "./errors";
import { readTextFile } from "./read-text-file";
import { applyTextEdits } from "./text-edits";
import { unifiedDiff } from "./unified-diff";
import { describeFsError, listDirectory, searchFiles } from "./workspace-files";
import { DEFAULT_COMMAND_TIMEOUT_MS } from "./workspace-server-launch";

export interface WorkspaceServerOptions {
  /** The workspace directory; every path argument is confined to it and commands run in it. */
  root: string;
  /** The whole environment of `run_command` commands: nothing else is inherited. */
  commandEnv: Record<string, string>;
  /** @defaultValue 120000 — a command's timeout when the call gives none, and the most it may ask for */
  commandTimeoutMs?: number;
  /** @defaultValue 65536 — bytes of a command's output (stdout and stderr together) returned, from the end */
  outputCapBytes?: number;
}

const SERVER_VERSION = "0.1.0";

function textResult(text: string, isError = false): CallToolResult {
  return isError
    ? { isError: true, content: [{ type: "text", text }] }
    : { content: [{ type: "text", text }] };
}

/**
 * Runs a tool body and turns any failure into a tool error result: the model reads the
 * message and can correct itself; nothing is thrown to the MCP layer.
 */
async function guarded(path: string, body: () => Promise<string>): Promise<CallToolResult> {
  try {
    return textResult(await body());
  } catch (error) {
    if (error instanceof PathConfinementError || error instanceof ToolFailure) {
      return textResult(error.message, true);
    }
    return textResult(describeFsError(error, path), true);
  }
}

/** A file's whole content, read from a handle openConfined gave (and closed after). */
async function readConfined(file: FileHandle): Promise<Buffer> {
  try {
    const stats = await file.stat();
    // A FIFO would read as empty (opened without blocking), a device as anything.
    if (!stats.isFile() && !stats.isDirectory()) {
      throw new ToolFailure(
        `it is not a regular file (${stats.isFIFO() ? "a FIFO" : "a device or a socket"}): this tool edits files`,
      );
    }
    return await file.readFile();
  } finally {
    await file.close();
  }
}

/** Replaces a file's content through a handle openConfined gave (and closes it). */
async function writeConfined(file: FileHandle, text: string): Promise<void> {
  try {
    await file.truncate(0);
    await file.writeFile(text, "utf8");
  } finally {
    await file.close();
  }
}

/** Kills every process group still running; synchronous, so it is done before the caller moves on. */
function killGroups(pids: Set<number>): void {
  for (const pid of pids) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // ESRCH: already gone.
    }
  }
  pids.clear();
}

/**
 * The built-in `workspace` MCP server: file tools named and shaped like the reference
 * filesystem server (`read_text_file`, `write_file`, `edit_file`, `list_directory`,
 * `search_files`) plus `run_command`, all confined to `opts.root`. Closing the server's
 * connection kills the process groups of commands still running.
 */
export function createWorkspaceServer(opts: WorkspaceServerOptions): McpServer {
  const { root, commandEnv } = opts;
  const maxTimeoutMs = opts.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
  const outputCapBytes = opts.outputCapBytes ?? 65_536;
  const running = new Set<number>();
  const closed = new AbortController();

  const server = new McpServer(
    { name: "workspace", version: SERVER_VERSION },
    {
      instructions:
        "Files and shell commands of one workspace directory. Paths are relative to the workspace " +
        "(absolute paths must lie inside it); commands run in it with `sh -c`.",
    },
  );
  server.server.onclose = () => {
    closed.abort();
    killGroups(running);
  };
  const displayPath = async (absolute: string) => relative(await realpath(root), absolute) || ".";

  server.registerTool(
    "read_text_file",
    {
      description:
        "Read a file of the workspace as UTF-8 text. Use `head` to read only the first N lines " +
        "or `tail` for the last N lines.",
      inputSchema: {
        path: z.string(),
        tail: z
          .number()
          .int()
          .min(0)
          .optional()
          .describe("If provided, returns only the last N lines of the file"),
        head: z
          .number()
          .int()
          .min(0)
          .optional()
          .describe("If provided, returns only the first N lines of the file"),
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ path, head, tail }) =>
      guarded(path, async () => {
        if (head !== undefined && tail !== undefined)
          throw new ToolFailure("give either head or tail, not both");
        const read = (at: string) => openConfined(root, at, path, "read");
        return readTextFile(await confinePath(root, path), { head, tail }, read);
      }),
  );

  server.registerTool(
    "write_file",
    {
      description:
        "Create a file or overwrite an existing one with `content`. Missing parent directories are created.",
      inputSchema: { path: z.string(), content: z.string() },
      annotations: {
        readOnlyHint: false,
        destructiveHint: true,
        idempotentHint: true,
        openWorldHint: false,
      },
    },
    async ({ path, content }) =>
      guarded(path, async () => {
        const absolute = await confinePath(root, path);
        await mkdir(dirname(absolute), { recursive: true });
        await writeConfined(await openConfined(root, absolute, path, "create"), content);
        return `Successfully wrote ${Buffer.byteLength(content)} bytes to ${path}`;
      }),
  );

  server.registerTool(
    "edit_file",
    {
      description:
        "Replace text in a file: each edit's `oldText` must match exactly one place (indentation " +
        "may differ) and is replaced by `newText`, in order. Returns a unified diff of the change; " +
        "with `dryRun` the file is left unchanged.",
      inputSchema: {
        path: z.string(),
        edits: z.array(
          z.object({
            oldText: z.string().describe("Text to search for - must match exactly"),
            newText: z.string().describe("Text to replace with"),
          }),
        ),
        dryRun: z.boolean().default(false).describe("Preview changes using git-style diff format"),
      },
      annotations: {
        readOnlyHint: false,
        destructiveHint: true,
        idempotentHint: false,
        openWorldHint: false,
      },
    },
    async ({ path, edits, dryRun }) =>
      guarded(path, async () => {
        const absolute = await confinePath(root, path);
        const bytes = await readConfined(await openConfined(root, absolute, path, "read"));
        // Read as UTF-8 and written back, another encoding's bytes would become U+FFFD.
        if (!isUtf8(bytes)) {
          throw new ToolFailure(
            `${path} is not UTF-8 text (binary, or another encoding): edit_file changes UTF-8 text only; ${path} was not changed`,
          );
        }
        const before = bytes.toString("utf8");
        const outcome = applyTextEdits(before, edits);
        if (!outcome.ok) throw new ToolFailure(`${outcome.error}; ${path} was not changed`);
        const diff = unifiedDiff(before, outcome.text, await displayPath(absolute));
        if (diff === "") return `No changes: the edits leave ${path} as it was`;
        if (!dryRun) {
          await writeConfined(await openConfined(root, absolute, path, "write"), outcome.text);
        }
        return `${dryRun ? "Dry run, nothing written:\n" : ""}\`\`\`diff\n${diff}\`\`\``;
      }),
  );

  server.registerTool(
    "list_directory",
    {
      description:
        "List a directory of the workspace, one entry a line: `[DIR] name` or `[FILE] name`.",
      inputSchema: { path: z.string() },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ path }) =>
      guarded(
        path,
        async () => (await listDirectory(await confinePath(root, path))) || "(empty directory)",
      ),
  );

  server.registerTool(
    "search_files",
    {
      description:
        "Recursively find files and directories under `path` whose name matches `pattern`: a glob " +
        "like `*.ts` or `test_*` matches names at any depth, a glob with `/` like `src/**/*.ts` " +
        "matches paths relative to `path`, and plain text matches names containing it " +
        "(case-insensitive). Returns workspace-relative paths, one a line.",
      inputSchema: {
        path: z.string(),
        pattern: z.string(),
        excludePatterns: z.array(z.string()).optional().default([]),
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ path, pattern, excludePatterns }) =>
      guarded(path, async () => {
        const start = await confinePath(root, path);
        const realRoot = await realpath(root);
        const { matches, truncated } = await searchFiles(realRoot, start, pattern, excludePatterns);
        if (matches.length === 0) return "No matches found";
        return (
          matches.join("\n") + (truncated ? `\n[… stopped after ${matches.length} matches …]` : "")
        );
      }),
  );

  server.registerTool(
    "run_command",
    {
      description:
        `Run a shell command (\`sh -c\`) in the workspace directory and return its exit code and ` +
        `output (stdout and stderr together, the last ${outputCapBytes} bytes). It is killed ` +
        `after \`timeoutMs\` (default and maximum ${maxTimeoutMs}). A non-zero exit is an error.`,
      inputSchema: {
        command: z.string().min(1),
        timeoutMs: z
          .number()
          .int()
          .positive()
          .optional()
          .describe(`Timeout in milliseconds (max ${maxTimeoutMs})`),
      },
      annotations: { readOnlyHint: false, destructiveHint: true, openWorldHint: true },
    },
    async ({ command, timeoutMs }, extra) => {
      if (closed.signal.aborted) return textResult("the workspace server is shutting down", true);
      let cwd: string;
      try {
        cwd = await confinePath(root, ".");
      } catch (error) {
        return textResult(messageOf(error), true);
      }
      const limitMs = Math.min(timeoutMs ?? maxTimeoutMs, maxTimeoutMs);
      let pid: number | undefined;
      const result = await runCommand({
        command,
        cwd,
        env: commandEnv,
        timeoutMs: limitMs,
        outputCapBytes,
        signal: AbortSignal.any([extra.signal, closed.signal]),
        onSpawn: (spawned) => {
          pid = spawned;
          running.add(spawned);
        },
      });
      if (pid !== undefined) running.delete(pid);
      const status = result.aborted
        ? "cancelled, the command was killed"
        : result.timedOut
          ? `timed out after ${limitMs} ms, the command was killed`
          : result.exitCode !== null
            ? `exit code ${result.exitCode}`
            : `killed by ${result.signal ?? "a signal"}`;
      const text = `${status} (${result.durationMs} ms)\n${result.output === "" ? "(no output)" : result.output}`;
      return textResult(text, result.exitCode !== 0);
    },
  );

  return server;
}
