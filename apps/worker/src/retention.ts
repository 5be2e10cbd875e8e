import { setImmediate } from "node:timers/promises";
import type { WorkspaceSnapshots } from "@looprun/core";
import type { PrunableRun, RetentionPort } from "@looprun/db";
import { inside } from "./workspace-cell";

export interface RetentionOptions {
  repo: { retention: Pick<RetentionPort, "candidates" | "deleteRuns"> };
  /** This worker's snapshot store: the deleted runs' refs go (see WorkspaceSnapshots.forgetRuns). */
  snapshots: Pick<WorkspaceSnapshots, "forgetRuns">;
  /** Runs that finished longer ago than this are deleted. */
  retentionMs: number;
  /** Only the runs whose workspace lies inside it (this host's cell): @defaultValue every run */
  workspacesRoot?: string;
  logger: { info(obj: object, msg?: string): void; warn(obj: object, msg?: string): void };
  /** Ends the pass between two batches (the worker shutting down). */
  signal?: AbortSignal;
  /** @defaultValue 50 — runs deleted in one transaction (SQLite's writers wait for it) */
  batch?: number;
  now?: () => number;
}

/**
 * Deletes the runs that finished longer ago than the retention, with all that is recorded of
 * them (see @looprun/db's retention.ts), a batch at a time, and then the refs of their
 * snapshots. The database goes first: a worker dying in between leaves refs of runs that are
 * gone, never a run whose snapshots are. Every worker runs it; two at once delete each run once.
 */
export async function pruneHistory(opts: RetentionOptions): Promise<{ runs: number }> {
  const now = opts.now ?? Date.now;
  const batch = opts.batch ?? 50;
  const ours = opts.workspacesRoot === undefined ? () => true : inside(opts.workspacesRoot);
  // Whole milliseconds: the columns are integers (PostgreSQL's bigint refuses a fraction, which
  // a LOOPRUN_RETENTION_DAYS such as 1e-7 gives).
  const finishedBefore = Math.floor(now() - opts.retentionMs);
  let after = "";
  let deleted = 0;
  while (opts.signal?.aborted !== true) {
    const page = await opts.repo.retention.candidates(finishedBefore, after, batch);
    const last = page.at(-1);
    if (last === undefined) break;
    after = last.id;
    const mine = page.filter((run) => ours(run.workspace));
    const gone = new Set(
      await opts.repo.retention.deleteRuns(
        mine.map((run) => run.id),
        finishedBefore,
        now(),
      ),
    );
    deleted += gone.size;
    for (const [sessionId, runIds] of bySession(mine.filter((run) => gone.has(run.id)))) {
      await opts.snapshots.forgetRuns(sessionId, runIds).catch((err: unknown) => {
        opts.logger.warn({ err, sessionId }, "could not delete the snapshot refs of deleted runs");
      });
    }
    if (page.length < batch) break;
    // SQLite answers synchronously: without a turn of the event loop between batches, a pass
    // over a long history would hold the worker's timers (its jobs' lock renewals) for its
    // whole length.
    await setImmediate();
  }
  if (deleted > 0) {
    opts.logger.info(
      { runs: deleted, finishedBefore: new Date(finishedBefore).toISOString() },
      "deleted the runs past the retention",
    );
  }
  return { runs: deleted };
}

function bySession(runs: readonly PrunableRun[]): Map<string, string[]> {
  const map = new Map<string, string[]>();
  for (const run of runs) {
    const ids = map.get(run.sessionId);
    if (ids) ids.push(run.id);
    else map.set(run.sessionId, [run.id]);
  }
  return map;
}
