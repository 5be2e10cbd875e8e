import type { FailurePattern } from "@looprun/core";
import { Hono } from "hono";
import { z } from "zod";
import type { AppDeps } from "../app-deps";
import { invalidRequest, notFound } from "../errors";
import { parseQuery, queryInt } from "../request-parsing";
import { resolveWorkspaceFilter } from "../workspaces";

export const ToolStatsQuery = z.strictObject({
  runId: z.string().min(1).max(64).optional(),
  /** A time window: only calls made since this ISO date-time. */
  since: z.iso.datetime({ offset: true }).optional(),
  /** Learned patterns of one workspace only (a path under WORKSPACES_ROOT, or absolute). */
  workspace: z.string().min(1).max(1000).optional(),
  /** Learned patterns of tools or of validation commands only. */
  scope: z.enum(["tool", "command"]).optional(),
  /** @defaultValue 20 — learned patterns listed (most failures first) */
  patterns: queryInt(z.number().int().min(0).max(100)).optional(),
});

/** Learned patterns `GET /api/stats/tools` lists unless `patterns=` says otherwise. */
const PATTERNS_LISTED = 20;

/** `GET /api/stats`: a window on the runs' creation time; both ends optional. */
export const ConvergenceStatsQuery = z.strictObject({
  /** Runs created at or after this ISO date-time. */
  since: z.iso.datetime({ offset: true }).optional(),
  /** Runs created before this ISO date-time. */
  until: z.iso.datetime({ offset: true }).optional(),
});

export function statsRoutes(deps: AppDeps): Hono {
  const app = new Hono();
  app.get("/", async (c) => {
    const q = parseQuery(c, ConvergenceStatsQuery);
    const since = q.since === undefined ? undefined : Date.parse(q.since);
    const until = q.until === undefined ? undefined : Date.parse(q.until);
    if (since !== undefined && until !== undefined && until <= since) {
      throw invalidRequest([{ path: "until", message: "must be later than since" }]);
    }
    const stats = await deps.repo.convergenceStats({
      ...(since !== undefined ? { since } : {}),
      ...(until !== undefined ? { until } : {}),
    });
    const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());
    return c.json({ window: { since: iso(since), until: iso(until) }, ...stats });
  });
  app.get("/tools", async (c) => {
    const q = parseQuery(c, ToolStatsQuery);
    if (q.runId !== undefined && !(await deps.repo.getRun(q.runId))) {
      throw notFound(`run ${q.runId}`);
    }
    const stats = await deps.repo.toolStats({
      ...(q.runId !== undefined ? { runId: q.runId } : {}),
      ...(q.since !== undefined ? { since: Date.parse(q.since) } : {}),
    });
    // What runs learned (all time; `runId` and `since` window the call statistics only).
    const patterns = await deps.repo.failurePatterns({
      ...(q.workspace !== undefined
        ? { workspace: resolveWorkspaceFilter(deps.workspacesRoot, q.workspace) }
        : {}),
      ...(q.scope !== undefined ? { scope: q.scope } : {}),
      limit: q.patterns ?? PATTERNS_LISTED,
    });
    return c.json({ ...stats, patterns: patterns.map(presentPattern) });
  });
  return app;
}

function presentPattern(p: FailurePattern) {
  const calls = p.successes + p.failures;
  return {
    scope: p.scope,
    workspace: p.workspace,
    subject: p.subject,
    shape: p.shape,
    successes: p.successes,
    failures: p.failures,
    meanDurationMs: calls === 0 ? 0 : Math.round(p.totalDurationMs / calls),
    lastErrors: p.lastErrors,
    lastRunId: p.lastRunId,
    lastSeenAt: new Date(p.lastSeenAt).toISOString(),
  };
}
