import type { RunRepository } from "@looprun/db";
import type { RunQueue } from "./run-queue";

export interface AppDeps {
  repo: RunRepository;
  queue: RunQueue;
  workspacesRoot: string;
  /** @defaultValue Date.now */
  now?: () => number;
  /** @defaultValue ulid */
  newId?: () => string;
  /** When set, every /api route requires `Authorization: Bearer <apiToken>`. */
  apiToken?: string;
  /** Checks the database for /readyz. */
  dbHealthy: () => boolean;
}
