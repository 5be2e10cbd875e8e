import { RUN_QUEUE, type RunJob } from "@looprun/core";
import { Queue } from "bullmq";
import { Redis } from "ioredis";

/** The API's side of the run queue: it enqueues, removes and reports Redis health. */
export interface RunQueue {
  /** Whether Redis is connected right now (requests fail fast when it is not). */
  isReady(): boolean;
  enqueue(runId: string): Promise<void>;
  /** Removes a run's job unless a worker holds it; `true` when no worker holds it now. */
  remove(runId: string): Promise<boolean>;
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

export interface RunQueueOptions {
  redisUrl: string;
  /** @defaultValue "looprun" — the BullMQ key prefix */
  prefix?: string;
}

export function createRunQueue(opts: RunQueueOptions): RunQueue {
  const connection = new Redis(opts.redisUrl, {
    // Fail fast while Redis is down so the API answers 503 instead of hanging.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  });
  connection.on("error", () => {
    // Reported through isReady() and /readyz; ioredis reconnects by itself.
  });
  const queue = new Queue<RunJob>(RUN_QUEUE, { connection, prefix: opts.prefix ?? "looprun" });
  queue.on("error", () => {});

  return {
    isReady: () => connection.status === "ready",
    async enqueue(runId) {
      await queue.add(
        "run",
        { runId },
        {
          jobId: runId,
          attempts: 3,
          backoff: { type: "exponential", delay: 1000 },
          removeOnComplete: { age: 3600, count: 1000 },
          removeOnFail: { age: 7 * 24 * 3600 },
        },
      );
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
    async close() {
      await queue.close();
      connection.disconnect();
    },
  };
}
