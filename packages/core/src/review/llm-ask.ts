import type { z } from "zod";
import { type ChatMessage, type ChatModel, ChatModelError } from "../llm/chat-model";
import { type JsonAnswer, parseJsonAnswer } from "../util/json-answer";

export interface LlmCallOptions {
  llm: ChatModel;
  model: string;
  signal: AbortSignal;
  /** Told the tokens of every call (they count towards the run's budget). */
  onTokens: (count: number) => Promise<void>;
  /** The run's tokens left: none left, no further call is made (TokenBudgetSpent). */
  tokensLeft?: () => number;
}

/** The run's token budget ran out between two calls: what was asked is not answered. */
export class TokenBudgetSpent extends Error {
  override readonly name = "TokenBudgetSpent";
  constructor() {
    super("the token budget ran out before the answer");
  }
}

async function call(opts: LlmCallOptions, messages: ChatMessage[], json: boolean) {
  if (opts.tokensLeft && opts.tokensLeft() <= 0) throw new TokenBudgetSpent();
  const res = await opts.llm.complete(
    { model: opts.model, messages, ...(json ? { json: true } : {}) },
    opts.signal,
  );
  await opts.onTokens(res.usage.totalTokens);
  return res.content;
}

const unreachable = (error: ChatModelError) => `the model could not be reached: ${error.message}`;

/**
 * Asks for a JSON answer and validates it with `schema`; an invalid answer is asked for once
 * more, with the error. A second invalid answer, or an unreachable model, is an error.
 */
export async function askForJson<S extends z.ZodType>(
  opts: LlmCallOptions,
  messages: ChatMessage[],
  schema: S,
): Promise<JsonAnswer<z.infer<S>>> {
  const conversation = [...messages];
  let error = "";
  try {
    for (let attempt = 1; attempt <= 2; attempt++) {
      const content = await call(opts, conversation, true);
      const parsed = parseJsonAnswer(schema, content);
      if (parsed.ok) return parsed;
      error = parsed.error;
      conversation.push({ role: "assistant", content: content ?? "" });
      conversation.push({
        role: "user",
        content: `That answer is invalid (${error}). Answer again with the JSON object only, in the shape asked for.`,
      });
    }
  } catch (e) {
    if (e instanceof ChatModelError) return { ok: false, error: unreachable(e) };
    throw e;
  }
  return { ok: false, error: `invalid answer twice: ${error}` };
}

/** Asks for a text answer; an empty one is asked for once more. */
export async function askForText(
  opts: LlmCallOptions,
  messages: ChatMessage[],
): Promise<JsonAnswer<string>> {
  const conversation = [...messages];
  try {
    for (let attempt = 1; attempt <= 2; attempt++) {
      const content = (await call(opts, conversation, false))?.trim() ?? "";
      if (content.length > 0) return { ok: true, value: content };
      conversation.push({ role: "assistant", content: "" });
      conversation.push({
        role: "user",
        content: "Your answer was empty. Answer the question, in text.",
      });
    }
  } catch (e) {
    if (e instanceof ChatModelError) return { ok: false, error: unreachable(e) };
    throw e;
  }
  return { ok: false, error: "the model answered nothing, twice" };
}
