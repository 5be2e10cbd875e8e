import { killRunOrphans, RUN_JOB_NAME, type RunJob, runJobOptions } from "@looprun/core";
import type { RunRepositoryPort } from "@looprun/db";
import type { Queue } from "bullmq";
import { inside } from "./workspace-cell";

export interface ReconcilerOptions {
  repo: Pick<RunRepositoryPort, "listUnfinishedRuns" | "getRun" | "finalizeStop">;
  queue: Queue<RunJob>;
  /** Ends a run whose job failed for good. */
  failRun: (runId: string, message: string) => Promise<void>;
  logger: { info(obj: object, msg?: string): void; warn(obj: object, msg?: string): void };
  /** @defaultValue 5000 — runs younger than this may not be enqueued yet by the API */
  graceMs?: number;
  /**
   * Only the runs whose workspace lies inside this directory are this queue's (a cell of its
   * own on a shared database: README, "Scaling beyond one machine"). @defaultValue every run
   */
  workspacesRoot?: string;
  now?: () => number;
}

/** States of a job that no worker holds: it waits for its turn or for its delay's end. */
const IDLE_STATES = new Set(["waiting", "delayed", "prioritized", "waiting-children"]);

/**
 * Makes the queue agree with the database, the source of truth: a run the DB holds as
 * queued/running with no job in Redis (Redis restarted empty, a job removed) is enqueued again
 * — job id = run id, so never twice; a stopping run with no job, or whose job no worker holds
 * (its stop could not reach Redis: it would wait out a cooldown or a free slot), is ended; a
 * run whose job failed for good is failed. Every worker runs it; it is idempotent.
 */
export async function reconcile(
  opts: ReconcilerOptions,
): Promise<{ enqueued: string[]; stopped: string[]; failed: string[] }> {
  const now = opts.now ?? Date.now;
  const result = { enqueued: [] as string[], stopped: [] as string[], failed: [] as string[] };
  const ours = opts.workspacesRoot === undefined ? () => true : inside(opts.workspacesRoot);
  for (const run of await opts.repo.listUnfinishedRuns(now() - (opts.graceMs ?? 5000))) {
    if (!ours(run.workspace)) continue;
    const job = await opts.queue.getJob(run.id);
    const state = job ? await job.getState() : "missing";
    // The list was read before the job's state: the run may have finished since (its job then
    // completes) or been stopped. Act on the run as it is now, not re-enqueue a finished one.
    const current = await opts.repo.getRun(run.id);
    if (current === null || !["queued", "running", "stopping"].includes(current.status)) continue;
    const jobless = state === "missing" || state === "unknown" || state === "completed";
    if (current.status === "stopping" && (jobless || IDLE_STATES.has(state))) {
      // No worker holds its job. A waiting one is taken off the queue first, and only if no
      // worker took it meanwhile (a locked job stays: that worker stops the run).
      const removed = (await opts.queue.remove(run.id).catch(() => 0)) === 1;
      if (jobless || removed) {
        // `stopped` means the run's processes are dead: a crashed worker's too (same host).
        killRunOrphans(current);
        await opts.repo.finalizeStop(run.id, now());
        result.stopped.push(run.id);
      }
      continue;
    }
    if (jobless) {
      // A completed job of an unfinished run was completed by a worker that lost it.
      if (job) await job.remove().catch(() => {});
      await opts.queue.add(RUN_JOB_NAME, { runId: run.id }, runJobOptions(run.id));
      result.enqueued.push(run.id);
    } else if (state === "failed") {
      // The job read above may be older than its failure (it failed between the two reads):
      // read it again for the reason BullMQ gave.
      const failed = (await opts.queue.getJob(run.id)) ?? job;
      await opts.failRun(run.id, failed?.failedReason || "its job failed");
      result.failed.push(run.id);
    }
  }
  if (result.enqueued.length + result.stopped.length + result.failed.length > 0) {
    opts.logger.warn(result, "reconciled runs with the queue");
  }
  return result;
}
