import { setMaxListeners } from "node:events";
import type { Server } from "node:http";
import { dirname, join, resolve } from "node:path";
import { serve } from "@hono/node-server";
import { getConnInfo } from "@hono/node-server/conninfo";
import {
  collectSecrets,
  keepYoungGenerationSmall,
  Redactor,
  redactingLogOptions,
} from "@looprun/core";
import { openStorage } from "@looprun/db";
import { pino } from "pino";
import { createApp } from "./app";
import { type ApiEnv, SHORT_TOKEN } from "./env";
import { BODY_LIMIT_BYTES, refuseLargeBodiesEarly } from "./request-body";
import { createRunQueue } from "./run-queue";
import { waitUntil } from "./wait-until";
import { prepareWorkspacesRoot } from "./workspaces";
import { submitBatcher } from "./write-batcher";

/**
 * How long requests in flight may take to finish once the API shuts down: longer than a Redis
 * command may take (3 s, run-queue.ts), so that a submit is answered.
 */
const SHUTDOWN_GRACE_MS = 5000;

export interface ApiServer {
  url: string;
  /** Where the data is: the SQLite file, or the PostgreSQL URL without its password. */
  database: string;
  close(): Promise<void>;
}

/**
 * Starts the HTTP API: opens the database — PostgreSQL when DATABASE_URL is set, else the
 * SQLite file — (migrating it) and connects to the queue.
 */
export async function startApi(env: ApiEnv): Promise<ApiServer> {
  keepYoungGenerationSmall();
  const redactor = new Redactor(
    collectSecrets(process.env, env.LOOPRUN_SECRET_ENV, env.AGENT_ENV_ALLOWLIST),
  );
  const logger = pino({
    level: env.LOG_LEVEL,
    base: { app: "api" },
    ...redactingLogOptions(redactor),
  });
  if (env.API_TOKEN !== undefined && env.API_TOKEN.length < SHORT_TOKEN) {
    logger.warn(
      `API_TOKEN is shorter than ${SHORT_TOKEN} characters: a token that short is easy to guess`,
    );
  }
  prepareWorkspacesRoot(resolve(env.WORKSPACES_ROOT));
  const storage = await openStorage({
    ...(env.DATABASE_URL !== undefined ? { url: env.DATABASE_URL } : {}),
    path: env.DATABASE_PATH,
    applicationName: "looprun-api",
    maxConnections: env.DATABASE_POOL_SIZE,
    queryTimeoutMs: env.DATABASE_QUERY_TIMEOUT_MS,
    onIdleError: (err) => logger.warn({ err: err.message }, "database connection lost"),
  });
  const queue = createRunQueue({ redisUrl: env.REDIS_URL, prefix: env.LOOPRUN_QUEUE_PREFIX });
  const writeBatcher = storage.engine === "sqlite" ? submitBatcher(storage.database) : undefined;
  const shutdown = new AbortController();
  // Every open event stream listens for it (and lets go when it ends): no limit to warn at.
  setMaxListeners(0, shutdown.signal);
  const app = createApp(
    {
      repo: storage.repo,
      queue,
      workspacesRoot: resolve(env.WORKSPACES_ROOT),
      // The same default as the workers': `snapshots` next to the database file.
      snapshotsDir: resolve(
        env.LOOPRUN_SNAPSHOTS_DIR ?? join(dirname(env.DATABASE_PATH), "snapshots"),
      ),
      ...(env.API_TOKEN ? { apiToken: env.API_TOKEN } : {}),
      redactor,
      corsOrigins: env.CORS_ORIGINS,
      ...(env.RATE_LIMIT_PER_MINUTE > 0 ? { rateLimitPerMinute: env.RATE_LIMIT_PER_MINUTE } : {}),
      clientKey: (c) => getConnInfo(c).remote.address ?? "unknown",
      live: { pollMs: env.LOOPRUN_SSE_POLL_MS, heartbeatMs: env.LOOPRUN_SSE_HEARTBEAT_MS },
      shutdown: shutdown.signal,
      // SQLite's submits share transactions (one fsync for those that arrive together), the
      // fsync in the thread pool while the run's job goes to Redis; PostgreSQL's run each in
      // one statement, in parallel on the pool.
      ...(writeBatcher ? { writeBatcher } : {}),
      dbHealthy: () => storage.ping(),
    },
    logger,
  );
  // Requests whose answer is not out yet (an event stream counts until its headers are).
  let inFlight = 0;
  const fetch = async (...args: Parameters<typeof app.fetch>) => {
    inFlight++;
    try {
      const res = await app.fetch(...args);
      // Shutting down: no connection is kept for a next request.
      if (shutdown.signal.aborted) {
        try {
          res.headers.set("connection", "close");
        } catch {
          // a response with immutable headers: its connection closes when idle
        }
      }
      return res;
    } finally {
      inFlight--;
    }
  };
  // HTTP/1.1 (serve's default): a node:http server.
  const server = serve({ fetch, hostname: env.HOST, port: env.PORT }) as Server;
  refuseLargeBodiesEarly(server, BODY_LIMIT_BYTES);
  await new Promise<void>((ready, fail) => {
    server.once("listening", ready);
    server.once("error", (error: NodeJS.ErrnoException) =>
      fail(
        error.code === "EADDRINUSE"
          ? Object.assign(
              new Error(`${error.message}: set PORT to another port (PORT=0: any free one)`),
              { code: error.code, cause: error },
            )
          : error,
      ),
    );
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : env.PORT;
  const host = env.HOST.includes(":") ? `[${env.HOST}]` : env.HOST;
  const url = `http://${host}:${port}`;
  logger.info({ url, database: storage.location }, "looprun API listening");
  return {
    url,
    database: storage.location,
    async close() {
      const stopping = Date.now();
      shutdown.abort();
      const closed = new Promise<void>((done) => server.close(() => done()));
      // The abort ends open event streams, but a client that reconnects at once (`looprun
      // watch`, a dashboard page) would keep its keep-alive connection busy, and the server
      // open, for as long as it runs: connections are closed as soon as they are idle, and
      // answers given meanwhile close theirs. Requests in flight (a submit between its commit
      // and its enqueue) finish and are answered; what still holds a connection after the
      // grace is cut.
      const idle = setInterval(() => server.closeIdleConnections(), 50);
      const cut = setTimeout(() => {
        // A stream or an answer that outlived the grace is a fault to look into: logged.
        logger.warn(
          { graceMs: SHUTDOWN_GRACE_MS, inFlight },
          "shutdown: connections still open, cut",
        );
        server.closeAllConnections();
      }, SHUTDOWN_GRACE_MS);
      await closed;
      clearInterval(idle);
      clearTimeout(cut);
      logger.info({ ms: Date.now() - stopping }, "shutdown: every connection closed");
      // A handler may outlive its cut connection: the queue and the database stay open for it.
      await waitUntil(() => inFlight === 0, SHUTDOWN_GRACE_MS);
      await queue.close();
      writeBatcher?.close();
      await storage.close();
      logger.info({ ms: Date.now() - stopping }, "looprun API stopped");
    },
  };
}
