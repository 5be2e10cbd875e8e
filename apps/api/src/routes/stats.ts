import { Hono } from "hono";
import { z } from "zod";
import type { AppDeps } from "../app-deps";
import { invalidRequest, notFound } from "../errors";
import { parseQuery } from "../request-parsing";

export const ToolStatsQuery = z.strictObject({
  runId: z.string().min(1).max(64).optional(),
  /** A time window: only calls made since this ISO date-time. */
  since: z.iso.datetime({ offset: true }).optional(),
});

/** `GET /api/stats`: a window on the runs' creation time; both ends optional. */
export const ConvergenceStatsQuery = z.strictObject({
  /** Runs created at or after this ISO date-time. */
  since: z.iso.datetime({ offset: true }).optional(),
  /** Runs created before this ISO date-time. */
  until: z.iso.datetime({ offset: true }).optional(),
});

export function statsRoutes(deps: AppDeps): Hono {
  const app = new Hono();
  app.get("/", (c) => {
    const q = parseQuery(c, ConvergenceStatsQuery);
    const since = q.since === undefined ? undefined : Date.parse(q.since);
    const until = q.until === undefined ? undefined : Date.parse(q.until);
    if (since !== undefined && until !== undefined && until <= since) {
      throw invalidRequest([{ path: "until", message: "must be later than since" }]);
    }
    const stats = deps.repo.convergenceStats({
      ...(since !== undefined ? { since } : {}),
      ...(until !== undefined ? { until } : {}),
    });
    const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());
    return c.json({ window: { since: iso(since), until: iso(until) }, ...stats });
  });
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
