/** The LLM port of the engine: one chat completion with tool calling. */

export interface ChatToolCall {
  id: string;
  name: string;
  /** JSON text, as the model wrote it (it may be invalid). */
  arguments: string;
}

export type ChatMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: string }
  | { role: "assistant"; content: string | null; toolCalls?: ChatToolCall[] }
  | { role: "tool"; content: string; toolCallId: string; name: string };

export interface ChatTool {
  name: string;
  description: string;
  /** A JSON Schema object. */
  parameters: Record<string, unknown>;
}

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  tools?: ChatTool[];
  /** `any` forces a tool call. */
  toolChoice?: "auto" | "any" | "none";
  /** Ask for a JSON object as the answer. */
  json?: boolean;
  temperature?: number;
}

export interface ChatUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

export interface ChatResponse {
  content: string | null;
  toolCalls: ChatToolCall[];
  finishReason: string;
  usage: ChatUsage;
}

export interface ChatModel {
  /** Rejects with `ChatModelError` once retries are spent, or when `signal` aborts. */
  complete(request: ChatRequest, signal: AbortSignal): Promise<ChatResponse>;
}

export class ChatModelError extends Error {
  override readonly name = "ChatModelError";
  constructor(
    message: string,
    readonly statusCode: number | null,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
