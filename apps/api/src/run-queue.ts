import { RUN_JOB_NAME, RUN_QUEUE, type RunJob, runJobOptions, stopChannel } from "@looprun/core";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { waitUntil } from "./wait-until";

/** The API's side of the run queue: it enqueues, removes and reports Redis health. */
export interface RunQueue {
  /** Whether Redis is connected right now (requests fail fast when it is not). */
  isReady(): boolean;
  enqueue(runId: string): Promise<void>;
  /**
   * Enqueues a run again whose earlier job ended (it waited for a person): the finished job,
   * which holds the job id, is removed first. A job a worker still holds is left to it.
   */
  requeue(runId: string): Promise<void>;
  /** Tells the worker holding a run (if any) to stop it now; best effort (workers also poll). */
  publishStop(runId: string): Promise<void>;
  /** Removes a run's job unless a worker holds it; `true` when no worker holds it now. */
  remove(runId: string): Promise<boolean>;
  ping(): Promise<boolean>;
  /** Jobs waiting, running and delayed (cooling down) — for the metrics; rejects while Redis is down. */
  jobCounts(): Promise<QueueDepth>;
  close(): Promise<void>;
}

export interface QueueDepth {
  waiting: number;
  active: number;
  delayed: number;
}

export interface RunQueueOptions {
  redisUrl: string;
  /** @defaultValue "looprun" — the BullMQ key prefix */
  prefix?: string;
}

/**
 * How long the API waits for Redis' answer to a command: a Redis that is connected but does not
 * answer (stopped, a stalled host) gets the same 503 as one that is down. This connection
 * never blocks (BZPOPMIN and the like are the workers'), so no answer takes longer.
 */
const COMMAND_TIMEOUT_MS = 3000;

/** How long a requeue waits for the run's job to finish being active (see requeue). */
const REQUEUE_WAIT_MS = 2000;

export function createRunQueue(opts: RunQueueOptions): RunQueue {
  const connection = new Redis(opts.redisUrl, {
    // Fail fast while Redis is down so the API answers 503 instead of hanging.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    commandTimeout: COMMAND_TIMEOUT_MS,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  });
  connection.on("error", () => {
    // Reported through isReady() and /readyz; ioredis reconnects by itself.
  });
  const prefix = opts.prefix ?? "looprun";
  const queue = new Queue<RunJob>(RUN_QUEUE, { connection, prefix });
  queue.on("error", () => {});

  return {
    isReady: () => connection.status === "ready",
    async enqueue(runId) {
      await queue.add(RUN_JOB_NAME, { runId }, runJobOptions(runId));
    },
    async requeue(runId) {
      const job = await queue.getJob(runId);
      let state = job ? await job.getState() : "missing";
      // The job of a run that just went to wait for a person may still be active for a moment
      // (its worker returned, BullMQ has not completed it yet): an add would be ignored (same
      // id) and the run left queued until the reconciler's next pass. It is waited for.
      if (job && state === "active") {
        await waitUntil(async () => {
          state = await job.getState();
          return state !== "active";
        }, REQUEUE_WAIT_MS);
      }
      if (job && (state === "completed" || state === "failed")) await job.remove();
      await queue.add(RUN_JOB_NAME, { runId }, runJobOptions(runId));
    },
    async publishStop(runId) {
      if (connection.status !== "ready") return;
      await connection.publish(stopChannel(prefix), runId).catch(() => {});
    },
    async remove(runId) {
      return (await queue.remove(runId)) === 1;
    },
    async ping() {
      if (connection.status !== "ready") return false;
      try {
        return (await connection.ping()) === "PONG";
      } catch {
        return false;
      }
    },
    async jobCounts() {
      if (connection.status !== "ready") throw new Error("the queue (Redis) is not connected");
      const counts = await queue.getJobCounts("waiting", "active", "delayed");
      return {
        waiting: counts.waiting ?? 0,
        active: counts.active ?? 0,
        delayed: counts.delayed ?? 0,
      };
    },
    async close() {
      await queue.close();
      connection.disconnect();
    },
  };
}
