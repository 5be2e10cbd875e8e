import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, McpError, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { TailBuffer } from "../process/tail-buffer";
import { capHead } from "../util/cut-marks";
import { messageOf } from "../util/errors";
import { ArgumentValidator } from "./argument-validator";
import { callResultText } from "./call-result-text";
import { cappedFetch, MAX_HTTP_REPLY_BYTES } from "./capped-fetch";
import { McpConnectError } from "./errors";
import { type JsonSchema, toMistralParameters } from "./mistral-parameters";
import { argumentsTooLarge, parseToolArguments } from "./tool-arguments";
import { ToolNameAllocator } from "./tool-names";

/** An MCP server started as a child process and spoken to over its stdin/stdout. */
export interface StdioServerSpec {
  name: string;
  command: string;
  args?: string[];
  /** Added to the few variables stdio clients pass on (HOME, LOGNAME, PATH, SHELL, TERM, USER). */
  env?: Record<string, string>;
  cwd?: string;
}

/** An MCP server reached over Streamable HTTP. */
export interface HttpServerSpec {
  name: string;
  url: string;
  headers?: Record<string, string>;
}

export type McpServerSpec = StdioServerSpec | HttpServerSpec;

export interface ToolHubOptions {
  /** @defaultValue 60000 — timeout of each tool call */
  requestTimeoutMs?: number;
  /**
   * @defaultValue 60000 — timeout of a server's start-up: initialisation and listing its tools
   * (separate from calls: a server started with `npx` may first have to be downloaded)
   */
  connectTimeoutMs?: number;
  /** @defaultValue 20000 — bytes of a call's result text kept (the beginning); a marker says how much was cut */
  resultCapBytes?: number;
  /** @defaultValue [] — function names the hub never hands out (the agent's own tools, e.g. `finish`) */
  reservedNames?: readonly string[];
  /** @defaultValue { name: "looprun", version: "0.1.0" } — how the hub introduces itself to servers */
  clientInfo?: { name: string; version: string };
  /**
   * Ends start-up (a stop, the run's deadline): `connect` rejects at once and closes the
   * servers started so far. @defaultValue none
   */
  signal?: AbortSignal;
}

/** A server's tool as offered to the model. */
export interface HubTool {
  /** Unique, valid function name (`^[a-zA-Z0-9_-]{1,64}$`), e.g. `workspace__read_text_file`. */
  name: string;
  server: string;
  /** The tool's own name on its server. */
  tool: string;
  description: string;
  /** The tool's input JSON Schema, made acceptable as Mistral function parameters. */
  parameters: JsonSchema;
}

/** The outcome of a call: always data, never an exception. */
export interface ToolCallOutcome {
  isError: boolean;
  /** The result's text, capped at `resultCapBytes`; for errors, what went wrong. */
  result: string;
  durationMs: number;
  /** `""` when the name is unknown. */
  server: string;
  tool: string;
}

/** Bytes of a stdio server's stderr kept, to explain why it failed. */
const STDERR_TAIL_BYTES = 4096;
/** How long `close()` waits for an HTTP server to acknowledge the end of the session. */
const TERMINATE_SESSION_MS = 2000;

interface Connection {
  name: string;
  client: Client;
  transport: Transport;
  stderr: TailBuffer | null;
  closed: boolean;
  /** Why the hub closed it, when it did (an HTTP server's event too large to read). */
  closedFor: { why: string | null };
}

interface Entry {
  tool: HubTool;
  connection: Connection;
  validate: (args: unknown) => string[];
}

/** Characters of a name no server has kept as the call's tool (function names have at most 64). */
const UNKNOWN_NAME_CHARS = 64;

/** A made-up tool name as recorded: any text a model sent, so capped (by code point). */
function unknownName(name: string): string {
  const chars = Array.from(name);
  return chars.length > UNKNOWN_NAME_CHARS
    ? `${chars.slice(0, UNKNOWN_NAME_CHARS).join("")}…`
    : name;
}

function stderrNote(stderr: TailBuffer | null): string {
  const text = stderr?.toString().trim();
  return text ? `\nserver stderr:\n${text}` : "";
}

async function connectServer(
  spec: McpServerSpec,
  clientInfo: { name: string; version: string },
  timeout: number,
  signal: AbortSignal,
): Promise<{ connection: Connection; tools: Tool[] }> {
  // No `roots` capability: server-filesystem would replace its allowed directories with ours.
  const client = new Client(clientInfo, { capabilities: {} });
  let stderr: TailBuffer | null = null;
  let transport: Transport | undefined;
  const closedFor: { why: string | null } = { why: null };
  // An event stream cut at the cap is told by the SDK only to `onerror`, leaving the call to
  // wait for its timeout: the connection is closed, which ends the call at once.
  const cutStream = (error: Error, events: boolean) => {
    if (!events) return;
    closedFor.why = error.message;
    client.close().catch(() => {});
  };
  try {
    if ("url" in spec) {
      transport = new StreamableHTTPClientTransport(new URL(spec.url), {
        requestInit: { headers: spec.headers ?? {} },
        // A reply is read whole into memory: at most MAX_HTTP_REPLY_BYTES of one.
        fetch: cappedFetch(MAX_HTTP_REPLY_BYTES, fetch, cutStream),
      });
    } else {
      const stdio = new StdioClientTransport({
        command: spec.command,
        args: spec.args ?? [],
        env: spec.env,
        cwd: spec.cwd,
        stderr: "pipe",
      });
      const tail = new TailBuffer(STDERR_TAIL_BYTES);
      stdio.stderr?.on("data", (chunk: Buffer) => tail.write(chunk));
      stderr = tail;
      transport = stdio;
    }
    signal.throwIfAborted();
    // The signal ends the initialisation and listing requests (the SDK cancels them).
    await client.connect(transport, { timeout, signal });
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor === undefined ? undefined : { cursor }, {
        timeout,
        signal,
      });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    signal.throwIfAborted();
    const connection: Connection = {
      name: spec.name,
      client,
      transport,
      stderr,
      closed: false,
      closedFor,
    };
    client.onclose = () => {
      connection.closed = true;
    };
    return { connection, tools };
  } catch (error) {
    await client.close().catch(() => {});
    await transport?.close().catch(() => {});
    const why = signal.aborted ? "its start-up was cancelled" : messageOf(error);
    throw new McpConnectError(spec.name, `${why}${stderrNote(stderr)}`, { cause: error });
  }
}

async function closeConnection(connection: Connection): Promise<void> {
  const { transport } = connection;
  if (transport instanceof StreamableHTTPClientTransport && !connection.closed) {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      transport.terminateSession().catch(() => {}),
      new Promise((resolve) => {
        timer = setTimeout(resolve, TERMINATE_SESSION_MS);
      }),
    ]);
    clearTimeout(timer);
  }
  await connection.client.close();
}

/**
 * The MCP servers of one agent run, connected, with their tools under collision-free
 * function names. Calls validate their arguments first and report every failure — unknown
 * tool, bad arguments, tool error, timeout, dead server, cancellation — as data.
 */
export class ToolHub {
  private readonly entries = new Map<string, Entry>();
  /** Every tool of every server, in server order. */
  readonly tools: readonly HubTool[];
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly connections: Connection[],
    listed: Tool[][],
    private readonly timeoutMs: number,
    private readonly resultCapBytes: number,
    reservedNames: readonly string[],
  ) {
    const names = new ToolNameAllocator(reservedNames);
    const validator = new ArgumentValidator();
    connections.forEach((connection, index) => {
      for (const tool of listed[index] ?? []) {
        const name = names.allocate(connection.name, tool.name);
        this.entries.set(name, {
          tool: {
            name,
            server: connection.name,
            tool: tool.name,
            description: tool.description ?? tool.title ?? "",
            parameters: toMistralParameters(tool.inputSchema),
          },
          connection,
          validate: validator.compile(tool.inputSchema),
        });
      }
    });
    this.tools = [...this.entries.values()].map((entry) => entry.tool);
  }

  /**
   * Starts (stdio) or reaches (HTTP) every server, in parallel, and lists its tools. If one
   * fails, the others' start-up is cancelled, those started are closed again, and a
   * {@link McpConnectError} names it; so when `opts.signal` is aborted.
   */
  static async connect(
    servers: readonly McpServerSpec[],
    opts: ToolHubOptions = {},
  ): Promise<ToolHub> {
    const seen = new Set<string>();
    for (const spec of servers) {
      if (spec.name.trim() === "") throw new McpConnectError(spec.name, "a server needs a name");
      if (seen.has(spec.name)) throw new McpConnectError(spec.name, "two servers have this name");
      seen.add(spec.name);
    }
    const timeoutMs = opts.requestTimeoutMs ?? 60_000;
    const connectTimeoutMs = opts.connectTimeoutMs ?? 60_000;
    const clientInfo = opts.clientInfo ?? { name: "looprun", version: "0.1.0" };
    // One failure (or the caller's abort) cancels the start-up of every other server.
    const startUp = new AbortController();
    const signal = opts.signal ? AbortSignal.any([opts.signal, startUp.signal]) : startUp.signal;
    const settled = await Promise.allSettled(
      servers.map((spec) =>
        connectServer(spec, clientInfo, connectTimeoutMs, signal).catch((error: unknown) => {
          startUp.abort(error);
          throw error;
        }),
      ),
    );
    const connected = settled.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
    const failure = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
    if (failure) {
      await Promise.allSettled(connected.map(({ connection }) => connection.client.close()));
      // The first failure, not the cancellations it caused.
      throw startUp.signal.reason ?? failure.reason;
    }
    return new ToolHub(
      connected.map((c) => c.connection),
      connected.map((c) => c.tools),
      timeoutMs,
      opts.resultCapBytes ?? 20_000,
      opts.reservedNames ?? [],
    );
  }

  tool(name: string): HubTool | undefined {
    return this.entries.get(name)?.tool;
  }

  /**
   * Calls the tool the model named `name` with `args` (an object, or its JSON text). Never
   * throws; aborting `signal` cancels the request on the server.
   */
  async call(name: string, args: unknown, signal?: AbortSignal): Promise<ToolCallOutcome> {
    const started = performance.now();
    const entry = this.entries.get(name);
    const outcome = (isError: boolean, text: string): ToolCallOutcome => ({
      isError,
      result: capHead(text, this.resultCapBytes),
      durationMs: Math.round(performance.now() - started),
      server: entry?.tool.server ?? "",
      tool: entry?.tool.tool ?? unknownName(name),
    });
    if (!entry) {
      return outcome(
        true,
        `unknown tool "${name}"; the tools are: ${[...this.entries.keys()].join(", ")}`,
      );
    }
    const parsed = parseToolArguments(args);
    if (!parsed.ok) return outcome(true, `${parsed.error}; ${name} was not called`);
    const tooLarge = argumentsTooLarge(parsed.value);
    if (tooLarge) return outcome(true, `${tooLarge}; ${name} was not called`);
    const problems = entry.validate(parsed.value);
    if (problems.length > 0) {
      return outcome(
        true,
        `invalid arguments for ${name}: ${problems.join("; ")}; the tool was not called`,
      );
    }
    const { connection } = entry;
    if (connection.closed || this.closing) {
      const why = connection.closedFor.why;
      return outcome(
        true,
        `MCP server "${connection.name}" is not connected any more${why === null ? "" : ` (${why})`}${stderrNote(connection.stderr)}`,
      );
    }
    if (signal?.aborted)
      return outcome(true, `the call of ${name} was cancelled before it started`);
    try {
      const result = await connection.client.callTool(
        { name: entry.tool.tool, arguments: parsed.value },
        undefined,
        { signal, timeout: this.timeoutMs },
      );
      const text =
        "toolResult" in result ? JSON.stringify(result.toolResult) : callResultText(result);
      return outcome(result.isError === true, text);
    } catch (error) {
      return outcome(true, this.describeFailure(entry, error, signal));
    }
  }

  private describeFailure(entry: Entry, error: unknown, signal: AbortSignal | undefined): string {
    const server = `MCP server "${entry.connection.name}"`;
    if (signal?.aborted) return `the call of ${entry.tool.name} was cancelled`;
    if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) {
      return `${server} did not answer ${entry.tool.tool} within ${this.timeoutMs} ms`;
    }
    if (error instanceof McpError && error.code === ErrorCode.ConnectionClosed) {
      const { why } = entry.connection.closedFor;
      if (why !== null)
        return `${server} failed ${entry.tool.tool}: ${why}; its connection was closed`;
      return `${server} closed the connection during ${entry.tool.tool}${stderrNote(entry.connection.stderr)}`;
    }
    return `${server} failed ${entry.tool.tool}: ${messageOf(error)}`;
  }

  /**
   * Closes every connection: stdio servers' processes are stopped, HTTP servers are told the
   * session is over (best effort). Idempotent.
   */
  close(): Promise<void> {
    this.closing ??= Promise.allSettled(this.connections.map(closeConnection)).then(() => {});
    return this.closing;
  }
}
