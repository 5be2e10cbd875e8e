/** A small client of the looprun HTTP API, for the CLI. */
export class ApiClient {
  constructor(
    readonly baseUrl: string,
    readonly token?: string,
  ) {}

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    let res: Response;
    try {
      res = await fetch(new URL(path, this.baseUrl), {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (error) {
      throw new Error(
        `cannot reach the looprun API at ${this.baseUrl} (${(error as Error).message}); is \`npm start\` running? Set LOOPRUN_URL otherwise.`,
      );
    }
    const text = await res.text();
    const json = text ? JSON.parse(text) : null;
    if (!res.ok) {
      const err = json?.error;
      const issues = Array.isArray(err?.issues)
        ? `\n${err.issues.map((i: { path: string; message: string }) => `  ${i.path || "(body)"}: ${i.message}`).join("\n")}`
        : "";
      throw new Error(`${res.status} ${err?.code ?? ""}: ${err?.message ?? text}${issues}`);
    }
    return json as T;
  }
}

export function clientFromEnv(): ApiClient {
  return new ApiClient(process.env.LOOPRUN_URL ?? "http://127.0.0.1:8787", process.env.API_TOKEN);
}
