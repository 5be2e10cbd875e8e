/**
 * Raw BullMQ, for scale: a Worker whose processor only reports when it starts. Prints
 * "ready" once it takes jobs, then "start JOB_ID EPOCH_MS" (fractional) for every job.
 * Configured by REDIS_URL, QUEUE_PREFIX, QUEUE_NAME and CONCURRENCY.
 */
import { Worker } from "bullmq";
import { Redis } from "ioredis";

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};

const connection = new Redis(env("REDIS_URL"), { maxRetriesPerRequest: null });
const worker = new Worker(
  env("QUEUE_NAME"),
  async (job) => {
    process.stdout.write(`start ${job.id} ${performance.timeOrigin + performance.now()}\n`);
  },
  { connection, prefix: env("QUEUE_PREFIX"), concurrency: Number(env("CONCURRENCY")) },
);
worker.on("error", () => {});
await worker.waitUntilReady();
process.stdout.write("ready\n");

const close = () => {
  void worker.close().finally(() => {
    connection.disconnect();
    process.exit(0);
  });
};
process.once("SIGTERM", close);
process.once("SIGINT", close);
