import { createServer, type IncomingMessage, type Server } from "node:http";

/** A chat completion request as the fake server received it. */
export interface ReceivedRequest {
  model: string;
  messages: {
    role: string;
    content: unknown;
    tool_calls?: unknown;
    tool_call_id?: string;
    name?: string;
  }[];
  tools?: { type: string; function: { name: string; description?: string; parameters: unknown } }[];
  tool_choice?: unknown;
  response_format?: { type: string };
  authorization: string | undefined;
}

export interface ScriptedToolCall {
  name: string;
  arguments: unknown;
}

/** What the fake answers to one request. */
export type Reply =
  | { content?: string; toolCalls?: ScriptedToolCall[]; tokens?: number }
  | { status: number; body?: unknown; headers?: Record<string, string> }
  | { hang: true };

export type Script = (req: ReceivedRequest, index: number) => Reply;

/** The model ending its turn: the mistral agent's `finish` tool, done or blocked (asking `summary`). */
export const finish = (summary: string, status: "done" | "blocked" = "done"): Reply => ({
  toolCalls: [{ name: "finish", arguments: { summary, status } }],
});

/** A 200 answer with exactly these choices (none, cut short…), as the vendor could send it. */
export const completion = (choices: unknown[]): Reply => ({
  status: 200,
  body: {
    id: "x",
    object: "chat.completion",
    created: 1,
    model: "m",
    usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 },
    choices,
  },
});

/**
 * A Mistral-compatible HTTP server (`POST /v1/chat/completions`) that answers from a script,
 * for the real `@mistralai/mistralai` client. The only fake in the suite: the LLM vendor.
 */
export class FakeMistral {
  readonly requests: ReceivedRequest[] = [];
  private server: Server | null = null;
  private script: Script = () => ({ content: "done" });
  url = "";

  /** Answers with these replies in order (the last one repeats). */
  replies(...list: Reply[]): this {
    this.script = (_req, i) => list[Math.min(i, list.length - 1)] ?? { content: "" };
    return this;
  }

  respond(script: Script): this {
    this.script = script;
    return this;
  }

  reset(): void {
    this.requests.length = 0;
  }

  async start(): Promise<this> {
    this.server = createServer(async (req, res) => {
      const body = await readBody(req);
      if (req.method !== "POST" || !req.url?.endsWith("/v1/chat/completions")) {
        res
          .writeHead(404, { "content-type": "application/json" })
          .end(JSON.stringify({ message: "not found" }));
        return;
      }
      const parsed = JSON.parse(body) as Omit<ReceivedRequest, "authorization">;
      const received: ReceivedRequest = { ...parsed, authorization: req.headers.authorization };
      const index = this.requests.length;
      this.requests.push(received);
      const reply = this.script(received, index);
      if ("hang" in reply) return; // never answers: for timeouts and aborts
      if ("status" in reply) {
        res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers });
        res.end(JSON.stringify(reply.body ?? { message: `scripted ${reply.status}` }));
        return;
      }
      const toolCalls = (reply.toolCalls ?? []).map((c, i) => ({
        id: `call${index}x${i}`.padEnd(9, "0").slice(0, 9),
        type: "function",
        function: {
          name: c.name,
          arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments),
        },
      }));
      const tokens = reply.tokens ?? 100;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id: `cmpl-${index}`,
          object: "chat.completion",
          created: Math.floor(Date.now() / 1000),
          model: parsed.model,
          usage: { prompt_tokens: tokens - 10, completion_tokens: 10, total_tokens: tokens },
          choices: [
            {
              index: 0,
              finish_reason: toolCalls.length > 0 ? "tool_calls" : "stop",
              message: {
                role: "assistant",
                content: reply.content ?? "",
                tool_calls: toolCalls.length > 0 ? toolCalls : null,
              },
            },
          ],
        }),
      );
    });
    await new Promise<void>((ok) => this.server?.listen(0, "127.0.0.1", ok));
    const address = this.server.address();
    const port = typeof address === "object" && address ? address.port : 0;
    this.url = `http://127.0.0.1:${port}`;
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((ok) => (this.server ? this.server.close(() => ok()) : ok()));
  }
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
