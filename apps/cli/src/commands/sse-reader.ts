// A text/event-stream body read as messages (the API's run events).

export interface SseMessage {
  event: string;
  data: string;
  id?: string;
}

/** What the SSE reader reports besides messages. */
export interface StreamHooks {
  /** Any bytes arrived. */
  activity(): void;
  /** A comment (`: ping`): the stream is alive. */
  comment(): void;
  /** The server's `retry:` (ms): how long it wants a client to wait before reconnecting. */
  retry(ms: number): void;
}

/** Yields the messages of a text/event-stream body. */
export async function* messages(
  body: ReadableStream<Uint8Array>,
  hooks: StreamHooks,
): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "message";
  let data: string[] = [];
  let id: string | undefined;
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    hooks.activity();
    buffer += decoder.decode(chunk, { stream: true });
    const lines = buffer.split(/\r\n|\r|\n/);
    buffer = lines.pop() ?? "";
    for (const line of lines) {
      if (line === "") {
        if (data.length > 0)
          yield { event, data: data.join("\n"), ...(id === undefined ? {} : { id }) };
        event = "message";
        data = [];
        id = undefined;
        continue;
      }
      if (line.startsWith(":")) {
        hooks.comment();
        continue;
      }
      const colon = line.indexOf(":");
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
      else if (field === "id") id = value;
      else if (field === "retry" && /^\d+$/.test(value)) hooks.retry(Number(value));
    }
  }
}
