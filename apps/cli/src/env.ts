import { z } from "zod";

/** The API's default address, as `npm start` serves it and LOOPRUN_URL defaults to. */
export const DEFAULT_API_URL = "http://127.0.0.1:8787";

/**
 * LOOPRUN_URL checked: an http(s) URL, which may carry a path (an API behind a proxy's prefix).
 * A trailing `/api` is the API's own (`looprun dev` prints its API as URL/api): dropped.
 */
const ApiUrl = z
  .string()
  .optional()
  .transform((given, ctx) => {
    const value = given || DEFAULT_API_URL;
    const refuse = (message: string) => {
      ctx.addIssue({ code: "custom", message });
      return z.NEVER;
    };
    const notHttp = `LOOPRUN_URL must be an http(s) URL such as ${DEFAULT_API_URL}, not ${JSON.stringify(value)}`;
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      return refuse(notHttp);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return refuse(notHttp);
    // `href`, not `search`/`hash`: an empty `?` or `#` leaves those empty but stays in the URL.
    if (/[?#]/.test(url.href)) {
      return refuse(`LOOPRUN_URL must not carry a query or a fragment: ${JSON.stringify(value)}`);
    }
    if (url.username !== "" || url.password !== "") {
      // Not echoed: it holds a password.
      return refuse("LOOPRUN_URL must not carry a user or a password: set API_TOKEN instead");
    }
    return url.href.replace(/\/+$/, "").replace(/\/api$/, "");
  });

/** How long a request may wait for the API's whole answer: LOOPRUN_CLI_TIMEOUT_MS, else 30 s. */
const RequestTimeoutMs = z
  .string()
  .optional()
  .transform((value, ctx) => {
    if (value === undefined || value === "") return 30_000;
    if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > 2_147_483_647) {
      ctx.addIssue({
        code: "custom",
        message: `LOOPRUN_CLI_TIMEOUT_MS must be a whole number of milliseconds from 1 to 2147483647, not ${JSON.stringify(value)}`,
      });
      return z.NEVER;
    }
    return Number(value);
  });

/**
 * The environment of the CLI's client commands (submit, watch, ls, show, stop). `dev`, `api`,
 * `worker` and `gc` parse theirs with the API's and the worker's own (their env.ts).
 */
export const CliEnv = z.object({
  LOOPRUN_URL: ApiUrl,
  /** Sent as a bearer token; empty is none. As the API's own (its env.ts): no outer whitespace. */
  API_TOKEN: z
    .string()
    .optional()
    .transform((v) => v || undefined)
    .refine(
      (token) => token === undefined || token.trim() === token,
      "API_TOKEN must not begin or end with whitespace (HTTP drops it from the Authorization header, so the token could never match)",
    ),
  LOOPRUN_CLI_TIMEOUT_MS: RequestTimeoutMs,
});

export type CliEnv = z.infer<typeof CliEnv>;

/** Parsed once per command; the message names the variable (each check's own words). */
export function parseCliEnv(source: Record<string, string | undefined>): CliEnv {
  const parsed = CliEnv.safeParse(source);
  if (!parsed.success) throw new Error(parsed.error.issues.map((i) => i.message).join("\n"));
  return parsed.data;
}
