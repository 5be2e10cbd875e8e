import { type Context, Hono } from "hono";
import { cors } from "hono/cors";
import type { AppDeps } from "./app-deps";
import { bearerAuth } from "./auth";
import { refuseCrossSite, refuseForeignHost } from "./cross-site";
import { dashboardRoutes } from "./dashboard/dashboard-routes";
import { ApiError, unavailable } from "./errors";
import { EVENTS_PAGE, RunEventsFeed } from "./live/run-events-feed";
import { RunFeed } from "./live/run-feed";
import { LIVE_DEFAULTS } from "./live/sse-session";
import { MetricsCollector } from "./metrics/metrics-collector";
import { rateLimit } from "./rate-limit";
import { BODY_LIMIT_BYTES, limitBody } from "./request-body";
import { liveRoutes } from "./routes/events-stream";
import { metricsRoutes } from "./routes/metrics";
import { openApiRoutes } from "./routes/openapi";
import { runRoutes } from "./routes/runs";
import { sessionRoutes } from "./routes/sessions";
import { statsRoutes } from "./routes/stats";
import { securityHeaders } from "./security-headers";

export interface AppLogger {
  error(obj: object, msg?: string): void;
}

/** The HTTP API. Every error leaves as `{"error": {code, message, ...}}`. */
export function createApp(deps: AppDeps, logger?: AppLogger): Hono {
  const app = new Hono();
  const now = deps.now ?? Date.now;

  app.onError((error, c) => {
    if (error instanceof ApiError) return c.json(error.toBody(), error.status);
    logger?.error({ err: error, path: c.req.path }, "request failed");
    if (deps.repo.isUnavailable?.(error)) {
      const down = unavailable("the database");
      return c.json(down.toBody(), down.status);
    }
    return c.json({ error: { code: "internal", message: "internal error" } }, 500);
  });
  app.notFound((c) =>
    c.json(
      { error: { code: "not_found", message: `no route for ${c.req.method} ${c.req.path}` } },
      404,
    ),
  );

  app.use("*", securityHeaders());
  // Without a token, only requests addressed to this machine by a loopback name (DNS rebinding).
  if (!deps.apiToken) app.use("*", refuseForeignHost(deps.corsOrigins ?? []));

  // Both say whether Redis and the database answer (the design's contract for each): a
  // process that answers at all, even 503, is alive.
  const health = async (c: Context) => {
    const [redis, db] = await Promise.all([deps.queue.ping(), deps.dbHealthy()]);
    const body = { redis: redis ? "up" : "down", db: db ? "up" : "down" };
    return c.json(body, redis && db ? 200 : 503);
  };
  app.get("/healthz", health);
  app.get("/readyz", health);
  // One budget per client for everything that takes the token: the API, the dashboard's
  // sign-in and the metrics (each would otherwise let a client guess the token freely).
  const limited = deps.rateLimitPerMinute
    ? rateLimit({ limit: deps.rateLimitPerMinute, clientKey: deps.clientKey ?? (() => "local") })
    : null;
  if (limited) for (const path of ["/login", "/metrics"]) app.use(path, limited);
  app.route("/metrics", metricsRoutes(new MetricsCollector(deps), deps.apiToken));

  if (deps.corsOrigins && deps.corsOrigins.length > 0) {
    app.use(
      "/api/*",
      cors({
        origin: deps.corsOrigins,
        // The API's methods (Hono's default list offers PUT, DELETE and PATCH too).
        allowMethods: ["GET", "HEAD", "POST"],
        allowHeaders: ["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"],
      }),
    );
  }
  app.use("/api/*", refuseCrossSite(deps.corsOrigins ?? []));
  if (limited) app.use("/api/*", limited);
  // The token first: a client without it learns nothing of the limits (a 413), and its body
  // is not read.
  if (deps.apiToken) app.use("/api/*", bearerAuth(deps.apiToken));
  app.use("/api/*", limitBody(deps.bodyLimitBytes ?? BODY_LIMIT_BYTES));
  const live = { ...LIVE_DEFAULTS, ...deps.live };
  // The live views' pollers, one of each per process (this app is one per process): the runs
  // feed, and one poller per followed run shared by all its streams.
  const feeds = {
    runs: new RunFeed({ repo: deps.repo, pollMs: live.pollMs, now }),
    events: new RunEventsFeed({ repo: deps.repo, pollMs: live.pollMs, page: EVENTS_PAGE }),
  };
  // Before runRoutes, whose /:id would take "stream" for an id.
  app.route("/api/runs", liveRoutes(deps, feeds, live));
  app.route("/api/runs", runRoutes(deps));
  app.route("/api/sessions", sessionRoutes(deps));
  app.route("/api/stats", statsRoutes(deps));
  app.route("/api/openapi.json", openApiRoutes());
  app.route("/", dashboardRoutes(deps.apiToken, deps.repo));
  return app;
}
