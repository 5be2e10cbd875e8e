// One request to the API, as a client makes it.

// biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

export interface RequestOptions {
  /** Sent as is instead of `JSON.stringify(body)`. */
  raw?: string;
  headers?: Record<string, string>;
  /** @defaultValue 15000 */
  timeoutMs?: number;
}

/** One HTTP request; the body is parsed as JSON when it is JSON. */
// biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
export async function request<T = any>(
  baseUrl: string,
  method: string,
  path: string,
  body?: unknown,
  opts: RequestOptions = {},
): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...opts.headers };
  let payload: string | undefined = opts.raw;
  if (payload === undefined && body !== undefined) payload = JSON.stringify(body);
  if (payload !== undefined) headers["content-type"] ??= "application/json";
  const res = await fetch(new URL(path, baseUrl), {
    method,
    headers,
    body: payload,
    signal: AbortSignal.timeout(opts.timeoutMs ?? 15_000),
  });
  const text = await res.text();
  let parsed: unknown = text;
  if ((res.headers.get("content-type") ?? "").includes("json") && text) parsed = JSON.parse(text);
  return { status: res.status, body: parsed as T, headers: res.headers };
}
