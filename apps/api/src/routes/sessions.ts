import { isActive } from "@looprun/core";
import { Hono } from "hono";
import type { AppDeps } from "../app-deps";
import { notFound } from "../errors";
import { isoTime } from "../iso-time";
import { jsonBody } from "../json-body";
import { presentRun } from "../presenters";

export function sessionRoutes(deps: AppDeps): Hono {
  const app = new Hono();
  const now = deps.now ?? Date.now;
  app.get("/:id", async (c) => {
    const id = c.req.param("id");
    const found = await deps.repo.getSession(id);
    if (!found) throw notFound(`session ${id}`);
    const t = now();
    const active = found.runs.find((r) => isActive(r.status));
    return jsonBody(c, {
      id: found.session.id,
      workspace: found.session.workspace,
      createdAt: isoTime(found.session.createdAt),
      activeRunId: active?.id ?? null,
      runs: found.runs.map((r) => presentRun(r, t)),
    });
  });
  return app;
}
