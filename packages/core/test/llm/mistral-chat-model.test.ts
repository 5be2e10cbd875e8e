import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { completion, FakeMistral } from "../../../../tests/support/fake-mistral";

import { ChatModelError } from "../../src/llm/chat-model";
import { MistralChatModel } from "../../src/llm/mistral-chat-model";
import { Redactor } from "../../src/util/redactor";

const completionBody = (choices: unknown[]) =>
  (completion(choices) as { body: Record<string, unknown> }).body;

describe("MistralChatModel (real SDK, fake Mistral server)", () => {
  const fake = new FakeMistral();
  let model: MistralChatModel;
  beforeAll(async () => {
    await fake.start();
    // The model loads the SDK at its first call, inside that call's timeout: loaded here, a
    // loaded machine's slow first import is not counted against the first test's 5 s.
    await import("@mistralai/mistralai");
    model = new MistralChatModel({
      apiKey: "test-key-123",
      serverURL: fake.url,
      timeoutMs: 5000,
      retry: { initialIntervalMs: 10, maxIntervalMs: 50, maxElapsedMs: 3000 },
    });
  });
  afterAll(() => fake.stop());
  beforeEach(() => fake.reset());

  const ask = (signal = new AbortController().signal) =>
    model.complete(
      {
        model: "mistral-small-latest",
        messages: [{ role: "user", content: "hi" }],
        tools: [
          {
            name: "read",
            description: "read a file",
            parameters: { type: "object", properties: { path: { type: "string" } } },
          },
        ],
      },
      signal,
    );

  it("sends tools and the key, and parses tool calls and usage", async () => {
    fake.replies({
      content: "reading",
      toolCalls: [{ name: "read", arguments: { path: "a.txt" } }],
      tokens: 120,
    });
    const res = await ask();
    expect(res.toolCalls).toEqual([
      { id: expect.any(String), name: "read", arguments: '{"path":"a.txt"}' },
    ]);
    expect(res.usage.totalTokens).toBe(120);
    expect(fake.requests[0]?.authorization).toBe("Bearer test-key-123");
    expect(fake.requests[0]?.tools?.[0]?.function.name).toBe("read");
  });

  it("cuts a long vendor error with a marker, so the redactor removes a secret cut in half", async () => {
    const secret = "npm_QWERTYUIOPASDFGHJKLZXCVBNM0123456789";
    fake.replies({ status: 400, body: { message: "probe" } });
    const probe = (await ask().catch((e: unknown) => e)) as ChatModelError;
    const at = probe.message.indexOf("probe");
    expect(at).toBeGreaterThan(0);
    // The vendor echoes a request whose tool result held the secret, 20 characters of it before 1000.
    fake.replies({ status: 400, body: { message: `${"x".repeat(980 - at)}${secret} and more` } });
    const error = (await ask().catch((e: unknown) => e)) as ChatModelError;
    expect(error).toBeInstanceOf(ChatModelError);
    expect(error.message).toMatch(/\n\[… \d+ of \d+ bytes cut …\]$/);
    const shown = new Redactor([secret]).text(`the model could not be reached: ${error.message}`);
    expect(shown).not.toContain(secret.slice(0, 10));
    expect(shown).toContain("[REDACTED]");
  });

  it("fails with a ChatModelError on an answer without choices", async () => {
    fake.replies(completion([]));
    const error = await ask().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ChatModelError);
    expect((error as Error).message).toContain("no choices");
  });

  it("takes an answer from a compatible server that leaves out usage and the envelope's fields", async () => {
    const choice = {
      index: 0,
      finish_reason: "tool_calls",
      message: {
        role: "assistant",
        content: "reading",
        tool_calls: [
          { id: "c1", type: "function", function: { name: "read", arguments: '{"path":"a"}' } },
        ],
      },
    };
    // No usage, id, object, created or model: all but the choices are the vendor's bookkeeping.
    fake.replies({ status: 200, body: { choices: [choice] } });
    const res = await ask();
    expect(res).toEqual({
      content: "reading",
      toolCalls: [{ id: "c1", name: "read", arguments: '{"path":"a"}' }],
      finishReason: "tool_calls",
      usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
    });
    // usage: null, and a partial one, count what is there.
    fake.reset();
    fake.replies(
      { status: 200, body: { ...completionBody([choice]), usage: null } },
      { status: 200, body: { ...completionBody([choice]), usage: { total_tokens: 42 } } },
    );
    expect((await ask()).usage.totalTokens).toBe(0);
    expect((await ask()).usage).toEqual({ promptTokens: 0, completionTokens: 0, totalTokens: 42 });
    // The two parts without their sum: the budget counts them (it counted none).
    fake.reset();
    fake.replies({
      status: 200,
      body: { ...completionBody([choice]), usage: { prompt_tokens: 200, completion_tokens: 100 } },
    });
    expect((await ask()).usage).toEqual({
      promptTokens: 200,
      completionTokens: 100,
      totalTokens: 300,
    });
  });

  it("still refuses an answer whose choices are not choices", async () => {
    fake.replies({ status: 200, body: { choices: [{ message: { role: 7 } }] } });
    const error = await ask().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ChatModelError);
    expect((error as Error).message).toContain("chat completion failed");
  });

  it("retries a 503 and then succeeds", async () => {
    fake.replies({ status: 503 }, { content: "ok" });
    const res = await ask();
    expect(res.content).toBe("ok");
    expect(fake.requests).toHaveLength(2);
  });

  it("honours Retry-After on a 429", async () => {
    fake.replies({ status: 429, headers: { "retry-after": "1" } }, { content: "after the wait" });
    // Retry-After is honoured up to the backoff's maximum interval.
    const patient = new MistralChatModel({
      apiKey: "test-key-123",
      serverURL: fake.url,
      retry: { initialIntervalMs: 10, maxIntervalMs: 5000, maxElapsedMs: 10_000 },
    });
    const started = Date.now();
    const res = await patient.complete(
      { model: "m", messages: [{ role: "user", content: "hi" }] },
      new AbortController().signal,
    );
    expect(res.content).toBe("after the wait");
    expect(fake.requests).toHaveLength(2);
    // Retry-After: 1 means the second request came no earlier than a second later.
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });

  it("gives up with a ChatModelError carrying the status once retries are spent", async () => {
    fake.replies({ status: 500 });
    const error = await ask().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ChatModelError);
    expect(fake.requests.length).toBeGreaterThan(1);
  });

  it("with the default retry limit, reports a lasting 500 with its status and body before its timeout ends the call", {
    timeout: 10_000,
  }, async () => {
    fake.replies({ status: 500, body: { message: "internal boom" } });
    const error = await new MistralChatModel({
      apiKey: "test-key-123",
      serverURL: fake.url,
      // Retries end at 2.5 s (half the timeout: the longest wait and a try fit in what is
      // left), so the last try is over well before the 5 s.
      timeoutMs: 5000,
      retry: { maxIntervalMs: 1000 },
    })
      .complete(
        { model: "m", messages: [{ role: "user", content: "hi" }] },
        new AbortController().signal,
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ChatModelError);
    expect((error as ChatModelError).statusCode).toBe(500);
    expect((error as Error).message).toContain("internal boom");
    expect(fake.requests.length).toBeGreaterThan(1);
  });

  describe("while the SDK waits to try again (Retry-After: 30)", () => {
    const waiting = (timeoutMs?: number) =>
      new MistralChatModel({
        apiKey: "test-key-123",
        serverURL: fake.url,
        ...(timeoutMs !== undefined ? { timeoutMs } : {}),
        retry: { initialIntervalMs: 10, maxIntervalMs: 60_000, maxElapsedMs: 120_000 },
      });
    const question = { model: "m", messages: [{ role: "user" as const, content: "hi" }] };

    // The wait is 30 s and each test has 10: one that waited for the next try would time out.
    it("is aborted by its signal without waiting for the next try", {
      timeout: 10_000,
    }, async () => {
      fake.replies({ status: 429, headers: { "retry-after": "30" } });
      const controller = new AbortController();
      const pending = waiting().complete(question, controller.signal);
      while (fake.requests.length === 0) await new Promise((r) => setTimeout(r, 10));
      controller.abort();
      const error = await pending.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ChatModelError);
      expect((error as Error).message).toBe("the call was aborted");
      expect(fake.requests).toHaveLength(1);
    });

    it("ends at its timeout without waiting for the next try", { timeout: 10_000 }, async () => {
      fake.replies({ status: 429, headers: { "retry-after": "30" } });
      // Far below the 30 s wait, long enough for the first request to be made under load.
      const error = await waiting(3000)
        .complete(question, new AbortController().signal)
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ChatModelError);
      expect((error as Error).message).toMatch(/chat completion failed: .*timeout/i);
      expect(fake.requests).toHaveLength(1);
    });
  });

  it("ends at its timeout while the server hangs, though the garbage collector runs meanwhile", {
    timeout: 10_000,
  }, async () => {
    // On Node 20, AbortSignal.any lost a timeout signal nothing else held to a collection:
    // the call then waited for as long as the server did (up to the run's deadline).
    fake.replies({ hang: true });
    const pending = new MistralChatModel({
      apiKey: "test-key-123",
      serverURL: fake.url,
      // Long enough for the request to reach the server under load before the call ends.
      timeoutMs: 3000,
      retry: { initialIntervalMs: 10, maxIntervalMs: 50, maxElapsedMs: 100 },
    })
      .complete(
        { model: "m", messages: [{ role: "user", content: "hi" }] },
        new AbortController().signal,
      )
      .catch((e: unknown) => e);
    while (fake.requests.length === 0) await new Promise((r) => setTimeout(r, 10));
    setFlagsFromString("--expose-gc");
    (runInNewContext("gc") as () => void)();
    const error = await pending;
    expect(error).toBeInstanceOf(ChatModelError);
    expect((error as Error).message).toMatch(/chat completion failed: .*timeout/i);
  });

  it("is aborted by its signal while the server hangs", async () => {
    fake.replies({ hang: true });
    const controller = new AbortController();
    const pending = ask(controller.signal);
    while (fake.requests.length === 0) await new Promise((r) => setTimeout(r, 10));
    controller.abort();
    await expect(pending).rejects.toBeInstanceOf(ChatModelError);
  });
});
