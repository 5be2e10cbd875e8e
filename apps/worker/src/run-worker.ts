import {
  collectSecrets,
  type EngineResources,
  failRun,
  MistralChatModel,
  Redactor,
  RUN_QUEUE,
  RunJob,
  redactingLogOptions,
  runStep,
} from "@looprun/core";
import { openDatabase, SqliteRunStore } from "@looprun/db";
import { DelayedError, type Job, Worker } from "bullmq";
import { Redis } from "ioredis";
import { pino } from "pino";
import type { WorkerEnv } from "./env";


export interface RunWorker {
  /** Stops taking jobs, hands the iterations in flight back to the queue, and closes. */
  close(): Promise<void>;
}

/**
 * A BullMQ worker that drives runs one step at a time: it claims a run, runs iterations
 * until the run ends or needs a cooldown, and then parks the job as delayed (so no worker
 * slot is held while a run cools down).
 */
export async function startWorker(env: WorkerEnv, commandEnv = process.env): Promise<RunWorker> {
  const redactor = new Redactor(collectSecrets(commandEnv, env.LOOPRUN_SECRET_ENV, env.AGENT_ENV_ALLOWLIST));
  const logger = pino({ level: env.LOG_LEVEL, base: { app: "worker", pid: process.pid }, ...redactingLogOptions(redactor) });
  const database = openDatabase(env.DATABASE_PATH);
  const store = new SqliteRunStore(database.db);
  const resources: EngineResources = {
    store,
    logger,
    commandEnv,
    envAllowlist: env.AGENT_ENV_ALLOWLIST,
    redactor,
    outputCapBytes: env.LOOPRUN_OUTPUT_CAP_BYTES,
    stopPollMs: env.LOOPRUN_STOP_POLL_MS,
    defaultModel: env.LOOPRUN_MISTRAL_MODEL,
    ...(env.MISTRAL_API_KEY
      ? {
          llm: new MistralChatModel({
            apiKey: env.MISTRAL_API_KEY,
            ...(env.MISTRAL_SERVER_URL ? { serverURL: env.MISTRAL_SERVER_URL } : {}),
            timeoutMs: env.LOOPRUN_LLM_TIMEOUT_MS,
            retry: { maxIntervalMs: env.LOOPRUN_LLM_RETRY_MAX_MS },
          }),
        }
      : {}),
  };
  const shutdown = new AbortController();
  const connection = new Redis(env.REDIS_URL, { maxRetriesPerRequest: null });
  connection.on("error", (err) => logger.warn({ err: err.message }, "redis connection error"));

  const processor = async (job: Job<RunJob>, token?: string) => {
    const { runId } = RunJob.parse(job.data);
    const result = await runStep(resources, runId, { shutdown: shutdown.signal });
    logger.info({ runId, result }, "run step done");
    switch (result.kind) {
      case "cooldown":
      case "handed_back":
        await job.moveToDelayed(result.kind === "cooldown" ? result.until : Date.now(), token);
        // A stop that came while the job was still active could not remove it (the API only
        // removes jobs no worker holds): wake the job so the stop is not left to the cooldown.
        if ((await store.getRun(runId))?.status === "stopping") {
          await job.promote().catch(() => {
            // Removed by the API meanwhile, or already waiting: nothing to wake.
          });
        }
        throw new DelayedError();
      case "finished":
        return { status: result.status, reason: result.reason };
      case "lease_lost":
      case "missing":
        return { outcome: result.kind };
    }
  };

  const worker = new Worker<RunJob>(RUN_QUEUE, processor, {
    connection,
    prefix: env.LOOPRUN_QUEUE_PREFIX,
    concurrency: env.WORKER_CONCURRENCY,
    lockDuration: env.LOOPRUN_LOCK_MS,
    stalledInterval: env.LOOPRUN_STALLED_INTERVAL_MS,
    maxStalledCount: 2,
  });
  worker.on("error", (err) => logger.warn({ err: err.message }, "worker error"));
  worker.on("failed", (job, err) => {
    if (!job) return;
    logger.error({ runId: job.data.runId, err: err.message, attempts: job.attemptsMade }, "run job failed");
    if (job.attemptsMade >= (job.opts.attempts ?? 1)) {
      void failRun(resources, job.data.runId, err.message).catch((e) =>
        logger.error({ err: e, runId: job.data.runId }, "could not mark the run failed"),
      );
    }
  });
  await worker.waitUntilReady();
  logger.info({ concurrency: env.WORKER_CONCURRENCY }, "looprun worker ready");

  return {
    async close() {
      shutdown.abort();
      await worker.close();
      await connection.quit().catch(() => connection.disconnect());
      database.close();
      logger.info("looprun worker closed");
    },
  };
}
