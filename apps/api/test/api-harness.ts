import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RUN_QUEUE, type RunStore } from "@looprun/core";
import { openStorage, type RunRepositoryPort, type Storage } from "@looprun/db";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { inject } from "vitest";
import { useFixture } from "../../../tests/support/fixture";
import { freshPostgresDatabase } from "../../../tests/support/pg-test-database";
import { createApp } from "../src/app";
import type { AppDeps } from "../src/app-deps";
import { createRunQueue } from "../src/run-queue";

/** The engines behind the API: every test parameterised over them runs on both. */
export const ENGINES = ["sqlite", "postgres"] as const;
export type Engine = (typeof ENGINES)[number];

/** The smallest valid submission: a command agent and a test command that both pass. */
export const VALID_RUN = {
  task: "make the tests pass",
  agent: { type: "command", command: "true" },
  testCommand: "true",
};

/**
 * The API over `app.request()`, with a real database — a SQLite file, or a new database on
 * the test run's PostgreSQL — and a real Redis queue. `store` is the engine's RunStore on the
 * same database (what a worker writes with).
 */
export async function apiHarness(
  redisUrl: string,
  engine: Engine = "sqlite",
  extra: Partial<AppDeps> = {},
) {
  const dir = mkdtempSync(join(tmpdir(), "looprun-api-test-"));
  let storage: Storage;
  let dropDatabase = async () => {};
  if (engine === "postgres") {
    const created = await freshPostgresDatabase("looprun_api");
    storage = await openStorage({ url: created.url, path: "", maxConnections: 5 });
    dropDatabase = created.drop;
  } else {
    storage = await openStorage({ path: join(dir, "looprun.db") });
  }
  const repo: RunRepositoryPort = storage.repo;
  const store: RunStore = storage.store;
  const prefix = `api-test-${Math.random().toString(36).slice(2)}`;
  const queue = createRunQueue({ redisUrl, prefix });
  const workspacesRoot = join(dir, "workspaces");
  const app = createApp({ repo, queue, workspacesRoot, dbHealthy: () => storage.ping(), ...extra });
  const inspectConnection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  inspectConnection.on("error", () => {});
  const inspect = new Queue(RUN_QUEUE, { connection: inspectConnection, prefix });
  inspect.on("error", () => {});

  const request = async (method: string, path: string, body?: unknown) => {
    const res = await app.request(path, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await res.text();
    // biome-ignore lint/suspicious/noExplicitAny: test responses are checked field by field
    return { status: res.status, body: (text ? JSON.parse(text) : null) as any };
  };

  const untilReady = async () => {
    for (let i = 0; i < 100 && !queue.isReady(); i++) await new Promise((r) => setTimeout(r, 20));
  };

  /** Another app on the same database and queue, with other settings (a token, limits…). */
  const appWith = (settings: Partial<AppDeps>) =>
    createApp({ repo, queue, workspacesRoot, dbHealthy: () => true, ...settings });

  return {
    engine,
    app,
    appWith,
    repo,
    store,
    storage,
    queue,
    inspect,
    workspacesRoot,
    request,
    untilReady,
    /** PostgreSQL: removes the database under the API (its connections are terminated). */
    dropDatabase: () => dropDatabase(),
    async close() {
      if (inspectConnection.status === "ready") {
        await inspect.obliterate({ force: true });
        await inspect.close();
      }
      inspectConnection.disconnect();
      await queue.close();
      await storage.close();
      await dropDatabase();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export type ApiHarness = Awaited<ReturnType<typeof apiHarness>>;

/**
 * The harness of a describe block's tests (or a file's, at its top level), on the test run's
 * Redis: made, with its queue connected, before them — once, or before each test with
 * `each` — and closed after. The object returned stands for the harness of the moment; `extra`
 * may be a function, read when the harness is made (a value an earlier hook set).
 */
export function useApiHarness(
  engine: Engine = "sqlite",
  extra: Partial<AppDeps> | (() => Partial<AppDeps>) = {},
  { each = false }: { each?: boolean } = {},
): ApiHarness {
  return useFixture(
    "the API harness",
    async () => {
      const h = await apiHarness(
        inject("redisUrl"),
        engine,
        typeof extra === "function" ? extra() : extra,
      );
      await h.untilReady();
      return h;
    },
    (h) => h.close(),
    { each },
  );
}
