import { statSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { movedAway, restoreWorkspace, SNAPSHOT_DEFAULTS, WorkspaceSnapshots } from "@looprun/core";
import { Hono } from "hono";
import { z } from "zod";
import type { AppDeps } from "../app-deps";
import { ApiError, notFound } from "../errors";
import { parseBody } from "../request-parsing";
import { unrestorableWorkspace } from "../workspaces";

/** `POST /api/runs/:id/rollback` body: the iteration whose snapshot to restore (0: the baseline). */
export const RollbackBody = z.strictObject({
  iteration: z.number().int().min(0).max(1_000_000),
});

/** A rollback's hold on the workspace outlives an API that died mid-restore by this much. */
const HOLD_TTL_MS = 5 * 60_000;

/**
 * Restores a run's workspace to the snapshot after iteration `n` (0: as it was before the
 * run). Refused while the session — or another session sharing the workspace — has an active
 * run (a worker may be writing there), or another rollback restores it, and when the
 * workspace directory is gone (see assertWorkspaceThere).
 */
export function rollbackRoutes(deps: AppDeps): Hono {
  const app = new Hono();
  const now = deps.now ?? Date.now;
  const snapshots = new WorkspaceSnapshots({
    root: deps.snapshotsDir ?? SNAPSHOT_DEFAULTS.dir,
    path: process.env.PATH,
  });
  app.post("/:id/rollback", async (c) => {
    const id = c.req.param("id");
    const run = await deps.repo.getRun(id);
    if (!run) throw notFound(`run ${id}`);
    const unrestorable = unrestorableWorkspace(deps.workspacesRoot, run.workspace);
    if (unrestorable !== null) {
      throw new ApiError(409, "workspace_missing", `${unrestorable}: not restored`, {
        workspace: run.workspace,
      });
    }
    const { iteration } = await parseBody(c, RollbackBody);
    // The workspace is this rollback's while it restores: refused while a run is active in the
    // session or the workspace, or another rollback restores it; runs submitted meanwhile wait.
    const hold = await deps.repo.holdWorkspace({
      workspace: run.workspace,
      sessionId: run.sessionId,
      runId: run.id,
      now: now(),
      ttlMs: HOLD_TTL_MS,
    });
    if (!hold.held) {
      // Deleted by retention since it was read.
      if ("runGone" in hold) throw notFound(`run ${id}`);
      throw new ApiError(
        409,
        "session_busy",
        hold.activeRunId !== undefined
          ? `session ${run.sessionId} is busy: run ${hold.activeRunId} is active${hold.activeRunId === run.id ? "" : " in its session or workspace"}`
          : `session ${run.sessionId} is busy: ${hold.heldByRun ? `a rollback of run ${hold.heldByRun}` : "another rollback"} is restoring its workspace`,
        hold.activeRunId !== undefined ? { activeRunId: hold.activeRunId } : {},
      );
    }
    const release = () =>
      deps.repo.releaseWorkspace({
        workspace: run.workspace,
        sessionId: run.sessionId,
        runId: run.id,
      });
    let snapshot: string | null;
    let restored: Awaited<ReturnType<typeof restoreWorkspace>>;
    try {
      snapshot =
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
      assertWorkspaceThere(run.workspace);
      restored = await restoreWorkspace(
        snapshots,
        { sessionId: run.sessionId, runId: run.id, workspace: run.workspace },
        snapshot,
      );
    } catch (error) {
      await release();
      throw error;
    }
    // Restored: the record of it must not be lost to a database that is down for a moment (a
    // restart, a query past its deadline), nor answered as a failure the client would repeat.
    // The event first: a hold not released expires (HOLD_TTL_MS); a record never made is gone.
    const data = { iteration, snapshot, before: restored.before, files: restored.files };
    const deadline = Date.now() + RECORD_RETRY_MS;
    await untilDone(deps, () => deps.repo.recordRollback(run.id, data, now()), data, deadline);
    await untilDone(deps, release, data, deadline);
    return c.json({ id: run.id, ...data });
  });

  return app;
}

/** How long a restored rollback tries to record itself while the database is unavailable. */
const RECORD_RETRY_MS = 60_000;
const RECORD_RETRY_EVERY_MS = 500;

/**
 * Runs `write` until it succeeds, again while the database is unavailable (until `deadline`);
 * then a 503 that says the workspace was restored, with what a 200 says.
 */
async function untilDone(
  deps: AppDeps,
  write: () => Promise<unknown> | unknown,
  data: { iteration: number; snapshot: string; before: string },
  deadline: number,
): Promise<void> {
  for (;;) {
    try {
      await write();
      return;
    } catch (error) {
      if (deps.repo.isUnavailable?.(error) !== true) throw error;
      if (Date.now() >= deadline) {
        throw new ApiError(
          503,
          "unavailable",
          `the workspace was restored to the snapshot of iteration ${data.iteration}, but the database is unavailable and did not record it: do not repeat the rollback`,
          { restored: true, snapshot: data.snapshot, before: data.before },
        );
      }
      await sleep(RECORD_RETRY_EVERY_MS);
    }
  }
}

/**
 * A 409 when the run's workspace is not a directory (removed since, or a volume not mounted):
 * the restore is not made into a directory created for it — where a path is missing because
 * its volume is, files written there would be lost or hide what is mounted later. The user
 * creates the directory and asks again: a restore into an empty one writes every file back.
 */
function assertWorkspaceThere(workspace: string): void {
  let isDirectory = false;
  try {
    isDirectory = statSync(workspace).isDirectory();
  } catch (error) {
    // ENOTDIR: a component of the path is a file now.
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== "ENOENT" && code !== "ENOTDIR") throw error;
  }
  if (!isDirectory) {
    throw new ApiError(
      409,
      "workspace_missing",
      `the run's workspace ${workspace} is not a directory (removed since the run?): create it and retry to restore the snapshot into it`,
      { workspace },
    );
  }
  // A symlink put into its path since would take the restore elsewhere, out of the root maybe,
  // and empty what it finds there: the workspace the run had is not there any more.
  const moved = movedAway(workspace, "the run's workspace");
  if (moved !== null) {
    throw new ApiError(409, "workspace_missing", `${moved}: not restored there`, { workspace });
  }
}
