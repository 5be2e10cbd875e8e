import { restoreWorkspace, SNAPSHOT_DEFAULTS, WorkspaceSnapshots } from "@looprun/core";
import { Hono } from "hono";
import { z } from "zod";
import type { AppDeps } from "../app-deps";
import { ApiError, notFound } from "../errors";
import { parseBody } from "../request-parsing";

/** `POST /api/runs/:id/rollback` body: the iteration whose snapshot to restore (0: the baseline). */
export const RollbackBody = z.strictObject({
  iteration: z.number().int().min(0).max(1_000_000),
});

/**
 * Restores a run's workspace to the snapshot after iteration `n` (0: as it was before the
 * run). Refused while the session has an active run (a worker may be writing there).
 */
export function rollbackRoutes(deps: AppDeps): Hono {
  const app = new Hono();
  const now = deps.now ?? Date.now;
  const snapshots = new WorkspaceSnapshots({
    root: deps.snapshotsDir ?? SNAPSHOT_DEFAULTS.dir,
    path: process.env.PATH,
  });
  // One restore at a time per session in this process: they share the session's git index.
  const inFlight = new Map<string, Promise<unknown>>();

  app.post("/:id/rollback", async (c) => {
    const id = c.req.param("id");
    const run = await deps.repo.getRun(id);
    if (!run) throw notFound(`run ${id}`);
    const { iteration } = await parseBody(c, RollbackBody);
    const activeRunId = await deps.repo.activeRunOf(run.sessionId);
    if (activeRunId !== null || inFlight.has(run.sessionId)) {
      throw new ApiError(
        409,
        "session_busy",
        `session ${run.sessionId} is busy: ${activeRunId ? `run ${activeRunId} is active` : "a rollback is in progress"}`,
        activeRunId ? { activeRunId } : {},
      );
    }
    const snapshot =
      iteration === 0
        ? run.baselineSnapshot
        : ((await deps.repo.artifacts.iterationSnapshot(run.id, iteration))?.snapshotId ?? null);
    if (snapshot === null) {
      throw notFound(
        iteration === 0
          ? `a baseline snapshot of run ${run.id} (it never started)`
          : `a snapshot of iteration ${iteration} of run ${run.id}`,
      );
    }
    const restore = restoreWorkspace(
      snapshots,
      { sessionId: run.sessionId, runId: run.id, workspace: run.workspace },
      snapshot,
    );
    inFlight.set(run.sessionId, restore);
    let restored: Awaited<typeof restore>;
    try {
      restored = await restore;
    } finally {
      inFlight.delete(run.sessionId);
    }
    const data = { iteration, snapshot, before: restored.before, files: restored.files };
    await deps.repo.recordRollback(run.id, data, now());
    return c.json({ id: run.id, ...data });
  });

  return app;
}
