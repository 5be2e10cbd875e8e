import { join } from "node:path";
import { SNAPSHOT_DEFAULTS } from "@looprun/core";
import { Hono } from "hono";
import type { AppDeps } from "../app-deps";
import { ApiError, notFound } from "../errors";
import { jsonBody } from "../json-body";
import { presentPhaseArtifact } from "../presenters";

/** Set on a diff that was cut at the stored cap. */
export const TRUNCATED_HEADER = "X-Looprun-Diff-Truncated";

/** A run's snapshots as text (an iteration's diff, the run's patch) and its phase artifacts. */
export function runArtifactRoutes(deps: AppDeps): Hono {
  const app = new Hono();

  const loadRun = async (id: string) => {
    const run = await deps.repo.getRun(id);
    if (!run) throw notFound(`run ${id}`);
    return run;
  };

  // The diff of iteration n against the snapshot before it (the previous iteration's, or the
  // baseline), as text/plain. An iteration without a snapshot (still running, interrupted)
  // has none yet: 404.
  app.get("/:id/iterations/:n/diff", async (c) => {
    const run = await loadRun(c.req.param("id"));
    const raw = c.req.param("n");
    const n = /^[1-9][0-9]{0,8}$/.test(raw) ? Number(raw) : null;
    const snapshot = n === null ? null : await deps.repo.artifacts.iterationSnapshot(run.id, n);
    if (snapshot === null) throw notFound(`a snapshot of iteration ${raw} of run ${run.id}`);
    c.header("X-Looprun-Snapshot", snapshot.snapshotId);
    if (snapshot.diffTruncated) c.header(TRUNCATED_HEADER, `${snapshot.diffBytes} bytes in total`);
    return c.text(snapshot.diff);
  });

  // The run's whole change, baseline → latest snapshot: `git apply` applies it to the
  // workspace as it was before the run. 404 before the first iteration's snapshot.
  app.get("/:id/patch", async (c) => {
    const run = await loadRun(c.req.param("id"));
    const change = await deps.repo.artifacts.change(run.id);
    if (change === null) {
      throw new ApiError(
        404,
        "not_found",
        `run ${run.id} has no patch yet: no iteration has been snapshotted`,
      );
    }
    if (change.patch === null) {
      // Not stored: the snapshots hold it, on the host of the workers (and of this API).
      const gitDir = join(deps.snapshotsDir ?? SNAPSHOT_DEFAULTS.dir, `${run.sessionId}.git`);
      throw new ApiError(
        404,
        "not_found",
        `the patch of run ${run.id} is ${change.patchBytes} bytes, more than the workers store; it lies between the snapshots ${change.baselineSnapshot} and ${change.headSnapshot}: git --git-dir=${gitDir} diff --binary ${change.baselineSnapshot} ${change.headSnapshot}`,
        { baselineSnapshot: change.baselineSnapshot, headSnapshot: change.headSnapshot },
      );
    }
    c.header("X-Looprun-Snapshot", change.headSnapshot);
    c.header("X-Looprun-Baseline", change.baselineSnapshot);
    return c.text(change.patch);
  });

  app.get("/:id/artifacts", async (c) => {
    const run = await loadRun(c.req.param("id"));
    const [change, phases] = await Promise.all([
      deps.repo.artifacts.change(run.id),
      deps.repo.artifacts.phases(run.id),
    ]);
    return jsonBody(c, {
      items: phases.map(presentPhaseArtifact),
      change:
        change === null
          ? null
          : {
              baselineSnapshot: change.baselineSnapshot,
              headSnapshot: change.headSnapshot,
              iteration: change.iteration,
              files: change.files,
              stat: change.stat,
              patchBytes: change.patchBytes,
              patchStored: change.patch !== null,
              updatedAt: new Date(change.updatedAt).toISOString(),
            },
    });
  });

  return app;
}
