import { commaList, envInt, envMs, MIN_SECRET_LENGTH } from "@looprun/core";
import { StorageSettings } from "@looprun/db";
import { z } from "zod";
import { isLoopbackAddress } from "./loopback";

/** The default rate limit of an API bound beyond loopback, per client address and minute. */
const PUBLIC_RATE_LIMIT = 1200;
/** A token shorter than this is taken, with a warning at start-up. */
export const SHORT_TOKEN = 16;

export const ApiEnv = z
  .object({
    HOST: z.string().min(1).default("127.0.0.1"),
    PORT: envInt(0, 65535).default(8787),
    ...StorageSettings,
    WORKSPACES_ROOT: z.string().min(1).default(".looprun/workspaces"),
    /** The workers' snapshot git dirs (rollbacks restore from them): as the worker's setting. */
    LOOPRUN_SNAPSHOTS_DIR: z.string().min(1).optional(),
    REDIS_URL: z.string().url().default("redis://127.0.0.1:6379"),
    /** BullMQ key prefix: lets several looprun installs (or test runs) share one Redis. */
    LOOPRUN_QUEUE_PREFIX: z
      .string()
      .regex(/^[A-Za-z0-9_-]+$/)
      .default("looprun"),
    /**
     * Empty counts as unset. At least MIN_SECRET_LENGTH characters, so that the redactor can
     * keep it out of everything stored and logged; under 16 the API warns at start-up.
     */
    API_TOKEN: z.preprocess(
      (v) => (v === "" ? undefined : v),
      z
        .string()
        .min(
          MIN_SECRET_LENGTH,
          `must be at least ${MIN_SECRET_LENGTH} characters (a shorter one could not be redacted)`,
        )
        // HTTP drops the whitespace around a header's value: such a token never matches.
        .refine(
          (token) => token.trim() === token,
          "must not begin or end with whitespace (HTTP drops it from the Authorization header, so the token could never match)",
        )
        .optional(),
    ),
    /** Names of further variables whose values are secrets: redacted from everything stored or logged. */
    LOOPRUN_SECRET_ENV: commaList,
    /**
     * The workers' allowlist, where the API shares their environment (`npm start`, that is
     * `looprun dev`: one host): the values of its variables whose names look secret are redacted here too.
     */
    AGENT_ENV_ALLOWLIST: commaList,
    /**
     * Comma-separated origins allowed by CORS; empty: no CORS. Each is an origin as a browser
     * sends it (`https://app.example:8443`: scheme, host, port; no path, no trailing slash),
     * or it would never match — a page refused with no hint why.
     */
    CORS_ORIGINS: commaList.pipe(
      z.array(
        z.string().refine(isOrigin, {
          error: (issue) =>
            `${JSON.stringify(issue.input)} is not an origin (scheme://host[:port], no path or trailing slash)`,
        }),
      ),
    ),
    /**
     * Requests per client address per minute on /api (0: no limit). Unset: 1200 when HOST is
     * not a loopback address, no limit on loopback (local clients are trusted there, as they
     * need no token).
     */
    RATE_LIMIT_PER_MINUTE: envInt(0).optional(),
    /**
     * PostgreSQL: a query the server has not answered after this long ends its connection, and
     * the request is answered 503 (0: wait as long as the server; see query-deadline.ts).
     */
    DATABASE_QUERY_TIMEOUT_MS: envInt(0, 3_600_000).default(10_000),
    /** How often a live stream (SSE) reads the database for new events and run changes. */
    LOOPRUN_SSE_POLL_MS: envMs(10).default(250),
    /** A `: ping` comment on an idle SSE stream after this long (proxies drop silent connections). */
    LOOPRUN_SSE_HEARTBEAT_MS: envMs(10).default(15_000),
    LOG_LEVEL: z
      .enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"])
      .default("info"),
  })
  .superRefine((env, ctx) => {
    if (!isLoopbackAddress(env.HOST) && env.API_TOKEN === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["API_TOKEN"],
        message: `is required when HOST (${env.HOST}) is not a loopback address`,
      });
    }
  })
  .transform((env) => ({
    ...env,
    RATE_LIMIT_PER_MINUTE:
      env.RATE_LIMIT_PER_MINUTE ?? (isLoopbackAddress(env.HOST) ? 0 : PUBLIC_RATE_LIMIT),
  }));
export type ApiEnv = z.infer<typeof ApiEnv>;

/** Parses the API's environment once; a bad variable stops the process with its name. */
export function parseApiEnv(source: Record<string, string | undefined>): ApiEnv {
  const parsed = ApiEnv.safeParse(source);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new Error(`invalid environment for the looprun API:\n${lines.join("\n")}`);
  }
  return parsed.data;
}

/** Whether `value` is an origin as a browser sends it in its `Origin` header. */
function isOrigin(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === "http:" || url.protocol === "https:") && url.origin === value;
  } catch {
    return false;
  }
}
