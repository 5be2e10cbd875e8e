import { Hono } from "hono";
import { bearerAuth } from "../auth";
import type { MetricsCollector } from "../metrics/metrics-collector";

/** GET /metrics: Prometheus text. Outside /api, but it takes the same bearer token when one is set. */
export function metricsRoutes(collector: MetricsCollector, apiToken: string | undefined): Hono {
  const app = new Hono();
  if (apiToken) app.use("*", bearerAuth(apiToken));
  app.get("/", async (c) =>
    c.body(await collector.scrape(), 200, { "content-type": collector.contentType }),
  );
  return app;
}
