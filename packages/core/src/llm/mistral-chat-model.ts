import type { Mistral } from "@mistralai/mistralai";
import { capHead } from "../util/cut-marks";
import { messageOf } from "../util/errors";
import { timeoutSignal } from "../util/timeout-signal";
import { unlessAborted } from "../util/unless-aborted";
import type { ChatModel, ChatRequest, ChatResponse, ChatToolCall } from "./chat-model";
import { ChatModelError } from "./chat-model";

export interface MistralChatModelOptions {
  apiKey: string;
  /** Any Mistral-compatible endpoint. @defaultValue the SDK's (https://api.mistral.ai) */
  serverURL?: string;
  /** Time for one call, retries included. @defaultValue 120000 */
  timeoutMs?: number;
  /** Backoff of the retries on 429, 5xx and connection errors (Retry-After is honoured). */
  retry?: { initialIntervalMs?: number; maxIntervalMs?: number; maxElapsedMs?: number };
}

type SdkMessage = Parameters<Mistral["chat"]["complete"]>[0]["messages"][number];
type SdkResponse = Awaited<ReturnType<Mistral["chat"]["complete"]>>;

/**
 * The answer of a Mistral-compatible server that the SDK refused for lack of the vendor's
 * bookkeeping alone (`usage`, `id`, `object`, `created`, `model`: some servers leave out
 * `usage`, or send it `null`), read again by the SDK's own schema with those filled in (no
 * usage: no tokens counted). Any other error is thrown again as it is.
 */
async function withoutBookkeeping(error: unknown, model: string): Promise<SdkResponse> {
  const raw = (error as { name?: unknown; rawValue?: unknown } | null)?.rawValue;
  if ((error as Error | null)?.name !== "ResponseValidationError" || !isObject(raw)) throw error;
  const { ChatCompletionResponse$inboundSchema: schema } = await import(
    "@mistralai/mistralai/models/components"
  );
  const filled = schema.safeParse({
    id: "",
    object: "chat.completion",
    created: 0,
    model,
    ...raw,
    usage: isObject(raw.usage) ? raw.usage : {},
  });
  if (!filled.success) throw error;
  return filled.data;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

function toSdkMessage(m: ChatRequest["messages"][number]): SdkMessage {
  switch (m.role) {
    case "system":
    case "user":
      return { role: m.role, content: m.content };
    case "assistant":
      return {
        role: "assistant",
        content: m.content ?? "",
        ...(m.toolCalls && m.toolCalls.length > 0
          ? {
              toolCalls: m.toolCalls.map((c) => ({
                id: c.id,
                type: "function" as const,
                function: { name: c.name, arguments: c.arguments },
              })),
            }
          : {}),
      };
    case "tool":
      return { role: "tool", content: m.content, toolCallId: m.toolCallId, name: m.name };
  }
}

function textOf(content: unknown): string | null {
  if (content === null || content === undefined) return null;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((chunk: { type?: string; text?: string }) =>
        chunk.type === "text" ? (chunk.text ?? "") : "",
      )
      .join("");
  }
  return null;
}

/**
 * The ChatModel on the official Mistral SDK (or any endpoint that speaks its API).
 *
 * The SDK is imported on the first call, not with this module: it adds about 100 MB to a
 * process's resident memory, which every API and worker process would otherwise carry (the
 * API never calls it, nor does a worker whose runs use command agents) — and a larger process
 * makes every `spawn` of an agent, validation or git command slower (fork copies its page tables).
 */
export class MistralChatModel implements ChatModel {
  private client: Promise<Mistral> | null = null;
  private readonly timeoutMs: number;

  constructor(private readonly opts: MistralChatModelOptions) {
    this.timeoutMs = opts.timeoutMs ?? 120_000;
  }

  private sdk(): Promise<Mistral> {
    const opts = this.opts;
    const maxInterval = opts.retry?.maxIntervalMs ?? 30_000;
    this.client ??= import("@mistralai/mistralai").then(
      ({ Mistral }) =>
        new Mistral({
          apiKey: opts.apiKey,
          ...(opts.serverURL ? { serverURL: opts.serverURL } : {}),
          retryConfig: {
            strategy: "backoff",
            backoff: {
              initialInterval: opts.retry?.initialIntervalMs ?? 500,
              maxInterval,
              exponent: 1.5,
              // Short of the call's timeout by a wait and a try: the SDK gives up first and
              // reports the last answer (status and body), where the timeout would only say it
              // timed out.
              maxElapsedTime:
                opts.retry?.maxElapsedMs ??
                Math.floor(Math.max(this.timeoutMs / 2, this.timeoutMs - maxInterval - 5000)),
            },
            retryConnectionErrors: true,
          },
        }),
    );
    return this.client;
  }

  async complete(request: ChatRequest, signal: AbortSignal): Promise<ChatResponse> {
    // The SDK lets a signal take precedence over its own timeout: combine both in one.
    const timed = timeoutSignal(signal, this.timeoutMs);
    const callSignal = timed.signal;
    let res: SdkResponse;
    try {
      const client = await this.sdk();
      const call = client.chat.complete(
        {
          model: request.model,
          messages: request.messages.map(toSdkMessage),
          ...(request.tools && request.tools.length > 0
            ? {
                tools: request.tools.map((t) => ({
                  type: "function" as const,
                  function: { name: t.name, description: t.description, parameters: t.parameters },
                })),
                toolChoice: request.toolChoice ?? "auto",
              }
            : {}),
          ...(request.json ? { responseFormat: { type: "json_object" as const } } : {}),
          ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
        },
        { signal: callSignal },
      );
      // The SDK's wait between two tries (Retry-After: 30, say) does not heed the signal: a
      // stop or the timeout ends the call at once, and the next try, aborted, ends the SDK's.
      call.catch(() => {});
      res = await unlessAborted(call, callSignal).catch((error: unknown) =>
        withoutBookkeeping(error, request.model),
      );
    } catch (error) {
      if (signal.aborted) throw new ChatModelError("the call was aborted", null, { cause: error });
      const status =
        typeof error === "object" && error !== null && "statusCode" in error
          ? Number((error as { statusCode: unknown }).statusCode)
          : null;
      const message = messageOf(error);
      // A marked cut: the vendor may echo the request (tool results with secrets in them), and
      // the redactor removes a secret's piece at a cut only where a line says it was cut.
      throw new ChatModelError(capHead(`chat completion failed: ${message}`, 1000), status, {
        cause: error,
      });
    } finally {
      timed.clear();
    }
    const choice = res.choices[0];
    // An answer without a choice says nothing: not a turn that ended without tool calls.
    if (!choice) throw new ChatModelError("the model's answer has no choices", null);
    const toolCalls: ChatToolCall[] = (choice.message?.toolCalls ?? []).map((c, i) => ({
      id: c.id ?? `call_${i}`,
      name: c.function.name,
      arguments:
        typeof c.function.arguments === "string"
          ? c.function.arguments
          : JSON.stringify(c.function.arguments),
    }));
    const promptTokens = tokenCount(res.usage.promptTokens);
    const completionTokens = tokenCount(res.usage.completionTokens);
    return {
      content: textOf(choice.message?.content),
      toolCalls,
      finishReason: String(choice.finishReason ?? "stop"),
      usage: {
        promptTokens,
        completionTokens,
        // Some compatible servers give the two parts without their sum: the budget counts them.
        // (The SDK reads a missing total as 0.) A negative total still counts as none.
        totalTokens:
          (res.usage.totalTokens ?? 0) < 0
            ? 0
            : tokenCount(res.usage.totalTokens) || promptTokens + completionTokens,
      },
    };
  }
}

/**
 * A count of tokens as a server reported it: a whole number, none when it is missing, negative
 * or not finite (a negative count would give the budget back, and metrics' counters cannot go down).
 */
function tokenCount(n: number | null | undefined): number {
  return typeof n === "number" && Number.isFinite(n) && n > 0 ? Math.floor(n) : 0;
}
