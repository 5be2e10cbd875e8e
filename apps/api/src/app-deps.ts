import type { Redactor } from "@looprun/core";
import type { RunRepositoryPort } from "@looprun/db";
import type { Context } from "hono";
import type { LiveOptions } from "./live/sse-session";
import type { RunQueue } from "./run-queue";
import type { WriteBatcher } from "./write-batcher";

export interface AppDeps {
  /** The database (SQLite or PostgreSQL) behind the API. */
  repo: RunRepositoryPort;
  queue: RunQueue;
  workspacesRoot: string;
  /** Where the workers keep the workspace snapshots (for rollbacks). @defaultValue .looprun/snapshots */
  snapshotsDir?: string;
  /** @defaultValue Date.now */
  now?: () => number;
  /** @defaultValue ulid */
  newId?: () => string;
  /** When set, every /api route requires `Authorization: Bearer <apiToken>`. */
  apiToken?: string;
  /** Applied to what a submission stores (task, commands, requirements…). */
  redactor?: Redactor;
  /** Origins allowed by CORS; none: no CORS headers at all. */
  corsOrigins?: string[];
  /** Requests per client per minute on /api; unset: no limit. */
  rateLimitPerMinute?: number;
  /** Who a client is, for the rate limit (its address). */
  clientKey?: (c: Context) => string;
  /** @defaultValue 1048576 */
  bodyLimitBytes?: number;
  /** Server-sent events: how often streams poll the database and ping while idle. */
  live?: Partial<LiveOptions>;
  /** Aborted when the server shuts down: open event streams end so that it can close. */
  shutdown?: AbortSignal;
  /**
   * SQLite only: group commit of submits (one transaction for those that arrive together);
   * unset: one each. It runs `repo.createRun` synchronously inside its transaction.
   */
  writeBatcher?: WriteBatcher;
  /** Checks the database for /readyz. */
  dbHealthy: () => boolean | Promise<boolean>;
}
