import { RUN_QUEUE, type RunJob } from "@looprun/core";
import { Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { afterEach, describe, expect, inject, it } from "vitest";
import { createRunQueue } from "../src/run-queue";

// The API's queue, on a real Redis with a real BullMQ worker.

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe("requeue (a person's answer sends a waiting run back to the workers)", () => {
  it("waits out a job that is still active a moment after its worker let the run go", async () => {
    const redisUrl = inject("redisUrl");
    const prefix = `run-queue-test-${Math.random().toString(36).slice(2)}`;
    const runQueue = createRunQueue({ redisUrl, prefix });
    const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
    const inspect = new Queue<RunJob>(RUN_QUEUE, { connection, prefix });
    const workerConnection = new Redis(redisUrl, { maxRetriesPerRequest: null });
    let letGo = () => {};
    const processed: string[] = [];
    const worker = new Worker<RunJob>(
      RUN_QUEUE,
      async (job) => {
        processed.push(job.data.runId);
        // The first step ends with the run waiting for a person; its job completes a bit later.
        if (processed.length === 1) await new Promise<void>((resolve) => (letGo = resolve));
      },
      { connection: workerConnection, prefix },
    );
    cleanups.push(async () => {
      await worker.close();
      workerConnection.disconnect();
      await inspect.obliterate({ force: true });
      await inspect.close();
      connection.disconnect();
      await runQueue.close();
    });
    for (let i = 0; i < 100 && !runQueue.isReady(); i++)
      await new Promise((r) => setTimeout(r, 20));

    await runQueue.enqueue("run-1");
    for (let i = 0; i < 200 && processed.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(await (await inspect.getJob("run-1"))?.getState()).toBe("active");

    // The answer arrives while the job is still active; the job completes 200 ms later.
    setTimeout(() => letGo(), 200);
    await runQueue.requeue("run-1");
    for (let i = 0; i < 300 && processed.length < 2; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(processed).toEqual(["run-1", "run-1"]);
  });
});
