import { dirname, join, resolve } from "node:path";
import { commaList, envInt, envMs } from "@looprun/core";
import { StorageSettings } from "@looprun/db";
import { z } from "zod";

const list = commaList.pipe(
  z.array(
    z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be a comma-separated list of variable names"),
  ),
);

export const WorkerEnv = z.object({
  ...StorageSettings,
  /**
   * Unset: this worker's reconciler enqueues again any unfinished run of the database that its
   * queue lost. Set (to the API's WORKSPACES_ROOT): only the runs whose workspace lies inside
   * it — one cell per host on a shared PostgreSQL, sessions pinned to their cell.
   */
  WORKSPACES_ROOT: z.string().min(1).optional(),
  REDIS_URL: z.string().url().default("redis://127.0.0.1:6379"),
  LOOPRUN_QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/)
    .default("looprun"),
  WORKER_CONCURRENCY: envInt(1, 256).default(2),
  /** Job lock (lease) duration; renewed every half of it while a run's iteration is in flight. */
  LOOPRUN_LOCK_MS: envMs(1000).default(60_000),
  /** How often stalled jobs (a dead worker's) are looked for and handed to another worker. */
  LOOPRUN_STALLED_INTERVAL_MS: envMs(500).default(30_000),
  /** How often runs the DB holds as unfinished are checked against the queue (re-enqueued when lost). */
  LOOPRUN_RECONCILE_MS: envMs(100).default(30_000),
  /**
   * Runs that finished longer ago than this many days are deleted, with all that is recorded of
   * them and their snapshots' refs (see retention.ts). Unset: every run is kept.
   */
  LOOPRUN_RETENTION_DAYS: z
    .string()
    .regex(/^\d+(\.\d+)?$/, "must be a number of days (e.g. 30 or 0.5)")
    .transform(Number)
    .pipe(z.number().positive("must be more than 0"))
    .optional(),
  /** How often a worker deletes the runs past the retention (and once at its start). */
  LOOPRUN_RETENTION_CHECK_MS: envMs(100).default(3_600_000),
  /** How often a running iteration checks the DB for a stop request. */
  LOOPRUN_STOP_POLL_MS: envMs(10).default(500),
  /** Extra environment variable names that agent and validation commands may see. */
  AGENT_ENV_ALLOWLIST: list,
  /** Names of further variables whose values are secrets: redacted from everything stored or logged. */
  LOOPRUN_SECRET_ENV: list,
  /** Bytes of each command's output kept (the tail). */
  LOOPRUN_OUTPUT_CAP_BYTES: envInt(1024).default(65_536),
  /** Enables the `mistral` agent. Never passed to commands, stored or logged. */
  MISTRAL_API_KEY: z.string().min(1).optional(),
  /** Any Mistral-compatible endpoint (e.g. a self-hosted model). */
  MISTRAL_SERVER_URL: z.string().url().optional(),
  /** The model of runs that name none. */
  LOOPRUN_MISTRAL_MODEL: z.string().min(1).default("mistral-large-latest"),
  /** Time for one LLM call, retries included. */
  LOOPRUN_LLM_TIMEOUT_MS: envMs(1000).default(120_000),
  /** Longest wait between LLM retries (a Retry-After is honoured up to it). */
  LOOPRUN_LLM_RETRY_MAX_MS: envMs(10).default(30_000),
  /**
   * Where workspace snapshots live: one bare git dir per session (needs git on PATH).
   * Unset: `snapshots` next to the database, i.e. `.looprun/snapshots` by default.
   */
  LOOPRUN_SNAPSHOTS_DIR: z.string().min(1).optional(),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
});
export type WorkerEnv = z.infer<typeof WorkerEnv>;

export function parseWorkerEnv(source: Record<string, string | undefined>): WorkerEnv {
  const parsed = WorkerEnv.safeParse(source);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new Error(`invalid environment for the looprun worker:\n${lines.join("\n")}`);
  }
  return parsed.data;
}

/** `LOOPRUN_SNAPSHOTS_DIR`, or `snapshots` next to the database file. */
export function snapshotsDirOf(
  env: Pick<WorkerEnv, "LOOPRUN_SNAPSHOTS_DIR" | "DATABASE_PATH">,
): string {
  return resolve(env.LOOPRUN_SNAPSHOTS_DIR ?? join(dirname(env.DATABASE_PATH), "snapshots"));
}

/**
 * The worker's environment as commands may see it: without its own `LOOPRUN_*` settings (where
 * every session's snapshots live, which names are secrets, its timers) — an agent has no use
 * for them, and the snapshots dir would let it rewrite other sessions' history. The run's own
 * `LOOPRUN_*` variables are added per command; another `LOOPRUN_*` name, or a setting listed
 * in AGENT_ENV_ALLOWLIST, still passes.
 */
export function withoutWorkerSettings(
  source: Record<string, string | undefined>,
  allowlist: readonly string[],
): Record<string, string | undefined> {
  const allowed = new Set(allowlist);
  const hidden = Object.keys(WorkerEnv.shape).filter(
    (name) => name.startsWith("LOOPRUN_") && !allowed.has(name),
  );
  const env = { ...source };
  for (const name of hidden) delete env[name];
  return env;
}
