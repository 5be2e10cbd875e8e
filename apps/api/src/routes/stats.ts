import { Hono } from "hono";
import { z } from "zod";
import type { AppDeps } from "../app-deps";
import { notFound } from "../errors";
import { parseQuery } from "../request-parsing";

export const ToolStatsQuery = z.strictObject({
  runId: z.string().min(1).max(64).optional(),
  /** A time window: only calls made since this ISO date-time. */
  since: z.iso.datetime({ offset: true }).optional(),
});

export function statsRoutes(deps: AppDeps): Hono {
  const app = new Hono();
  app.get("/tools", (c) => {
    const q = parseQuery(c, ToolStatsQuery);
    if (q.runId !== undefined && !deps.repo.getRun(q.runId)) throw notFound(`run ${q.runId}`);
    return c.json(
      deps.repo.toolStats({
        ...(q.runId !== undefined ? { runId: q.runId } : {}),
        ...(q.since !== undefined ? { since: Date.parse(q.since) } : {}),
      }),
    );
  });
  return app;
}
