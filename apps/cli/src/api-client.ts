import { type CliEnv, parseCliEnv } from "./env";

/** An API field (a path the API's 400 names, e.g. `maxIterations`) → the CLI flag that sets it. */
export type FlagNames = Readonly<Record<string, string>>;

export interface RequestOptions {
  /** Names the flag instead of the API field in a 400's issues. */
  flags?: FlagNames;
}

interface Issue {
  path: string;
  message: string;
}

/** An answer of the API other than 2xx, with its message written for the CLI's user. */
export class ApiRequestError extends Error {
  override readonly name = "ApiRequestError";
  constructor(
    readonly status: number,
    readonly code: string | undefined,
    message: string,
  ) {
    super(message);
  }
}

/** No answer from the API at all (refused, reset, no such host); `cause` is fetch's error. */
export class ApiUnreachableError extends Error {
  override readonly name = "ApiUnreachableError";
}

/** The path of a run (and below it): the id is one path segment, whatever it holds. */
export function runPath(id: string, rest = ""): string {
  // An empty id would name the runs list (`/api/runs/`), which answers "no route".
  if (id.trim() === "") throw new Error("the run id is empty: give the id `looprun ls` prints");
  return `/api/runs/${encodeURIComponent(id)}${rest}`;
}

/** Why a fetch got no answer: Node's fetch says only "fetch failed", its cause says why. */
export function fetchFailure(error: unknown): { code: string | undefined; detail: string } {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } }).cause;
  const code = cause?.code ?? (error as { code?: unknown }).code;
  const detail = typeof cause?.message === "string" ? cause.message : (error as Error).message;
  return { code: typeof code === "string" ? code : undefined, detail };
}

const FAILURE_WORDS: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ENOTFOUND: "no such host",
  EAI_AGAIN: "the host name could not be resolved now",
  ECONNRESET: "the connection was reset",
  EHOSTUNREACH: "no route to the host",
  ENETUNREACH: "the network is unreachable",
  ETIMEDOUT: "the connection timed out",
  UND_ERR_CONNECT_TIMEOUT: "the connection timed out",
  UND_ERR_SOCKET: "the connection closed before an answer",
};

/** A fetch failure in words, with the system's code when there is one. */
function unreachableReason(error: unknown): string {
  const { code, detail } = fetchFailure(error);
  if (code === undefined) return detail;
  // OpenSSL's own text is a line of internals; an https URL for an http API is the usual cause.
  if (code.startsWith("ERR_SSL_")) return `TLS failed: is the API served over http? (${code})`;
  return `${FAILURE_WORDS[code] ?? detail} (${code})`;
}

/**
 * The field names of `text` replaced by their flags: a whole path (`maxIterations`, or
 * `validationCommands.1` → `--validate #2`), or the camelCase names inside a message (plain
 * words such as `task` stay words).
 */
function withFlags(text: string, flags: FlagNames = {}): string {
  const item = /^(.+)\.(\d+)$/.exec(text);
  if (item && flags[item[1] as string])
    return `${flags[item[1] as string]} #${Number(item[2]) + 1}`;
  if (flags[text]) return flags[text] as string;
  // A field inside one a flag sets (`plan.steps.0.title` of `--plan FILE`): the flag, then the rest.
  const outer = Object.keys(flags)
    .filter((name) => text.startsWith(`${name}.`))
    .sort((a, b) => b.length - a.length)[0];
  if (outer !== undefined) return `${flags[outer]}: ${text.slice(outer.length + 1)}`;
  return text.replace(/\b[a-z]+(?:[A-Z][a-z]*)+\b/g, (name) => flags[name] ?? name);
}

/** The CLI's line for an API error body (`{"error": {code, message, issues?}}`). */
function describeApiError(
  status: number,
  body: unknown,
  text: string,
  opts: RequestOptions & { token?: string } = {},
): ApiRequestError {
  const err = (body as { error?: { code?: string; message?: string; issues?: unknown } } | null)
    ?.error;
  const head = `${status}${err?.code ? ` ${err.code}` : ""}`;
  const issues = Array.isArray(err?.issues) ? (err.issues as Issue[]) : [];
  const issueLine = (i: Issue) =>
    i.path
      ? `${withFlags(i.path, opts.flags)}: ${withFlags(i.message, opts.flags)}`
      : withFlags(i.message, opts.flags);
  let message: string;
  // The API's message repeats its first issue: the issues alone, once each.
  if (issues.length === 1) message = `${head}: ${issueLine(issues[0] as Issue)}`;
  else if (issues.length > 1)
    message = `${head}: ${issues.length} problems\n${issues.map((i) => `  ${issueLine(i)}`).join("\n")}`;
  else message = `${head}: ${err?.message ?? (text.trim().slice(0, 300) || "no details")}`;
  if (status === 401)
    message += opts.token
      ? " (API_TOKEN is set, but the API does not take it: set API_TOKEN to the API's token)"
      : " (the API wants a token: set API_TOKEN to the API's token)";
  return new ApiRequestError(status, err?.code, message);
}

/** The CLI's error for an answer other than 2xx, read from its body (JSON, or any text). */
export async function apiErrorOf(
  res: Response,
  opts: RequestOptions & { token?: string } = {},
): Promise<ApiRequestError> {
  const text = await res.text().catch(() => "");
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // Not the API's JSON (a proxy's page, say): its text is the message.
  }
  return describeApiError(res.status, body, text, opts);
}

/** A small client of the looprun HTTP API, for the CLI. */
export class ApiClient {
  /** The API's address without a final slash: an API path is appended to it as it is. */
  readonly baseUrl: string;

  constructor(
    baseUrl: string,
    readonly token?: string,
    /** How long a request may wait for the whole answer (LOOPRUN_CLI_TIMEOUT_MS, env.ts). */
    readonly timeoutMs = 30_000,
  ) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
  }

  /** The URL of an API path (`/api/…`), under the base URL's own path if it has one. */
  url(path: string): URL {
    return new URL(`${this.baseUrl}${path}`);
  }

  async request<T>(
    method: string,
    path: string,
    body?: unknown,
    opts: RequestOptions = {},
  ): Promise<T> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    let res: Response;
    let text: string;
    // The answer's body too: a server that sends its headers and then nothing would hang it.
    const signal = AbortSignal.timeout(this.timeoutMs);
    try {
      res = await fetch(this.url(path), {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
      });
      if (!res.ok) throw await apiErrorOf(res, { ...opts, token: this.token });
      text = await res.text();
    } catch (error) {
      if (error instanceof ApiRequestError) throw error;
      if (signal.aborted) {
        throw new ApiUnreachableError(
          `the looprun API at ${this.baseUrl} did not answer ${method} ${path} within ${this.timeoutMs} ms (LOOPRUN_CLI_TIMEOUT_MS); is LOOPRUN_URL the looprun API?`,
          { cause: error },
        );
      }
      throw new ApiUnreachableError(
        `cannot reach the looprun API at ${this.baseUrl} (${unreachableReason(error)}); is \`npm start\` running? Set LOOPRUN_URL otherwise.`,
        { cause: error },
      );
    }
    try {
      return (text ? JSON.parse(text) : null) as T;
    } catch {
      throw new Error(
        `${this.baseUrl} answered ${res.status} with no JSON: is LOOPRUN_URL the looprun API?`,
      );
    }
  }
}

/** A client of the API the environment names (LOOPRUN_URL, API_TOKEN: see env.ts). */
export function clientFromEnv(env: CliEnv = parseCliEnv(process.env)): ApiClient {
  return new ApiClient(env.LOOPRUN_URL, env.API_TOKEN, env.LOOPRUN_CLI_TIMEOUT_MS);
}
