import { randomUUID } from "node:crypto";
import {
  closeSnapshotsOf,
  collectSecrets,
  type EngineResources,
  failRun,
  keepYoungGenerationSmall,
  MistralChatModel,
  posixSpawnUnavailable,
  Redactor,
  RUN_QUEUE,
  RunJob,
  redactingLogOptions,
  removeStaleTempDirs,
  runStep,
  stopChannel,
  useLauncher,
} from "@looprun/core";
import { openStorage } from "@looprun/db";
import { DelayedError, type Job, Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { pino } from "pino";
import { snapshotsDirOf, type WorkerEnv, withoutWorkerSettings } from "./env";
import { reconcile } from "./reconciler";
import { startRetention } from "./retention-timer";
import { forgetStalls, forgetStallsOnProgress } from "./stall-count";

/**
 * Files the snapshot store keeps made ahead (see SpareFiles in @looprun/core): a snapshot of
 * one changed file writes three objects (blob, tree, commit); one more for a second file.
 */
const SPARE_FILES = 4;

export interface RunWorker {
  /** Stops taking jobs, hands the iterations in flight back to the queue, and closes. */
  close(): Promise<void>;
}

/** What the worker can tell the run it drives: stop it now, or that its lease is gone. */
interface ActiveRun {
  stop: AbortController;
  leaseLost: AbortController;
}

/**
 * A BullMQ worker that drives runs one step at a time: it claims a run, runs iterations
 * until the run ends or needs a cooldown, and then parks the job as delayed (so no worker
 * slot is held while a run cools down).
 */
export async function startWorker(env: WorkerEnv, commandEnv = process.env): Promise<RunWorker> {
  keepYoungGenerationSmall();
  // Commands and git are spawned without copying the worker: through posix_spawn, or a small
  // launcher process where the addon is not built (see packages/core/src/process/launch.ts).
  useLauncher();
  const redactor = new Redactor(
    collectSecrets(commandEnv, env.LOOPRUN_SECRET_ENV, env.AGENT_ENV_ALLOWLIST),
  );
  const logger = pino({
    level: env.LOG_LEVEL,
    base: { app: "worker", pid: process.pid },
    ...redactingLogOptions(redactor),
  });
  if (posixSpawnUnavailable !== null) {
    logger.info(
      { why: posixSpawnUnavailable },
      "commands are spawned through a launcher process: the posix_spawn addon is not available",
    );
  }
  // PostgreSQL when DATABASE_URL is set (workers on several hosts), else the SQLite file. A
  // worker's SQLite writes are checkpoints it can redo (see OpenDatabaseOptions.synchronous):
  // not one fsync per write, as for the API's acceptance of a run.
  const storage = await openStorage({
    ...(env.DATABASE_URL !== undefined ? { url: env.DATABASE_URL } : {}),
    path: env.DATABASE_PATH,
    sqliteSynchronous: "NORMAL",
    applicationName: "looprun-worker",
    maxConnections: env.DATABASE_POOL_SIZE,
    onIdleError: (err) => logger.warn({ err: err.message }, "database connection lost"),
  });
  const { store, repo } = storage;
  const resources: EngineResources = {
    store,
    logger,
    commandEnv: withoutWorkerSettings(commandEnv, env.AGENT_ENV_ALLOWLIST),
    envAllowlist: env.AGENT_ENV_ALLOWLIST,
    redactor,
    outputCapBytes: env.LOOPRUN_OUTPUT_CAP_BYTES,
    stopPollMs: env.LOOPRUN_STOP_POLL_MS,
    defaultModel: env.LOOPRUN_MISTRAL_MODEL,
    snapshotsDir: snapshotsDirOf(env),
    // Files for the snapshots' objects made while commands run (removed on close).
    spareFiles: SPARE_FILES,
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
  const prefix = env.LOOPRUN_QUEUE_PREFIX;
  const shutdown = new AbortController();
  const active = new Map<string, ActiveRun>();
  /** The steps in flight: the database stays open until they end. */
  const steps = new Set<Promise<unknown>>();
  // ioredis reconnects for ever, and a disconnect() while it waits to reconnect settles
  // nothing (redis/ioredis#2169): once the worker closes, a lost connection ends at its next
  // failed attempt instead, which rejects what waits on it. Duplicates (the subscriber, BullMQ's
  // blocking connection) share this strategy.
  let closing = false;
  const connection = new Redis(env.REDIS_URL, {
    maxRetriesPerRequest: null,
    retryStrategy: (times) => (closing ? null : Math.min(times * 50, 2000)),
  });
  connection.on("error", (err) => logger.warn({ err: err.message }, "redis connection error"));

  // Stop requests reach the worker holding the run at once; the engine also polls the DB.
  const subscriber = connection.duplicate();
  subscriber.on("error", () => {});
  subscriber.on("message", (_channel, runId: string) => active.get(runId)?.stop.abort());
  await subscriber.subscribe(stopChannel(prefix));

  const processor = async (job: Job<RunJob>, token?: string) => {
    const { runId } = RunJob.parse(job.data);
    const handle: ActiveRun = { stop: new AbortController(), leaseLost: new AbortController() };
    // The job came back while this worker still drives the run (its lock was lost, e.g. Redis
    // restarted empty and the reconciler enqueued it again): that earlier step is stale.
    const stale = active.get(runId);
    stale?.leaseLost.abort();
    active.set(runId, handle);
    // BullMQ renews locks by job id, and stops renewing that id when the stale step ends: this
    // step then renews its own lock, or it would be taken for stalled and interrupted again.
    const renewal =
      stale && token
        ? setInterval(() => {
            job.extendLock(token, env.LOOPRUN_LOCK_MS).then(
              (extended) => {
                if (!extended) handle.leaseLost.abort();
              },
              () => {
                // Redis unreachable: the next renewal tries again.
              },
            );
          }, env.LOOPRUN_LOCK_MS / 4)
        : undefined;
    let result: Awaited<ReturnType<typeof runStep>>;
    const onProgress = forgetStallsOnProgress(
      job.stalledCounter,
      () => forgetStalls(connection, worker.toKey(job.id ?? runId)),
      (err) => logger.warn({ err, runId }, "could not reset the job's stall count"),
    );
    const step = runStep(resources, runId, {
      shutdown: shutdown.signal,
      stop: handle.stop.signal,
      leaseLost: handle.leaseLost.signal,
      ...(onProgress ? { onProgress } : {}),
    });
    steps.add(step);
    try {
      result = await step;
    } finally {
      steps.delete(step);
      clearInterval(renewal);
      // Not the handle of a newer step of the same run: stops must still reach that one.
      if (active.get(runId) === handle) active.delete(runId);
    }
    logger.info({ runId, result }, "run step done");
    switch (result.kind) {
      case "store_unavailable":
        // The database is down for now: the job waits, without spending one of its attempts.
        await job.moveToDelayed(result.until, token);
        throw new DelayedError();
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
      case "awaiting_approval": {
        // The job ends: no slot is held while a person decides; approve/reply enqueue it again.
        // One answered in the moment before this job completes could not enqueue it (the job
        // still existed): it goes on now instead.
        const current = await store.getRun(runId);
        if (current?.status === "queued") {
          await job.moveToDelayed(Date.now(), token);
          throw new DelayedError();
        }
        return { status: "awaiting_approval" };
      }
      case "lease_lost":
      case "missing":
        return { outcome: result.kind };
    }
  };

  const worker = new Worker<RunJob>(RUN_QUEUE, processor, {
    connection,
    prefix,
    name: `looprun-worker-${process.pid}-${randomUUID().slice(0, 8)}`,
    concurrency: env.WORKER_CONCURRENCY,
    lockDuration: env.LOOPRUN_LOCK_MS,
    stalledInterval: env.LOOPRUN_STALLED_INTERVAL_MS,
    // A run whose worker keeps dying is failed after this many stalls (and its session freed).
    maxStalledCount: 2,
  });
  worker.on("error", (err) => logger.warn({ err: err.message }, "worker error"));
  worker.on("lockRenewalFailed", (jobIds: string[]) => {
    logger.warn({ jobIds }, "job locks lost: abandoning those runs");
    for (const id of jobIds) active.get(id)?.leaseLost.abort();
  });
  const failForGood = (runId: string, message: string) =>
    failRun(resources, runId, message).catch((e: unknown) =>
      logger.error({ err: e, runId }, "could not mark the run failed"),
    );
  worker.on("failed", (job, err) => {
    if (!job) return;
    logger.error(
      { runId: job.data.runId, err: err.message, attempts: job.attemptsMade },
      "run job failed",
    );
    // Only a job that BullMQ will not retry (attempts spent, or stalled too often) fails its run.
    void job
      .isFailed()
      .then((final) => (final ? failForGood(job.data.runId, err.message) : undefined));
  });
  await worker.waitUntilReady();

  const queue = new Queue<RunJob>(RUN_QUEUE, { connection, prefix });
  // Its connection's errors are logged above (without a listener BullMQ prints each one raw).
  queue.on("error", () => {});
  let reconciling: Promise<unknown> = Promise.resolve();
  const reconcileNow = () => {
    reconciling = reconcile({
      repo,
      queue,
      failRun: failForGood,
      logger,
      ...(env.WORKSPACES_ROOT !== undefined ? { workspacesRoot: env.WORKSPACES_ROOT } : {}),
    }).catch((err: unknown) => logger.warn({ err }, "reconcile failed"));
  };
  reconcileNow();
  // A worker killed mid-agent leaves its prompt directory behind, mid-review its reviewer's.
  void removeStaleTempDirs().then(
    (removed) => removed > 0 && logger.info({ removed }, "removed stale temporary directories"),
    (err: unknown) => logger.warn({ err }, "could not look for stale temporary directories"),
  );
  const reconcileTimer = setInterval(reconcileNow, env.LOOPRUN_RECONCILE_MS);
  reconcileTimer.unref();
  const retention = startRetention(env, repo, shutdown.signal, logger);
  logger.info(
    { concurrency: env.WORKER_CONCURRENCY, database: storage.location },
    "looprun worker ready",
  );

  return {
    async close() {
      closing = true;
      clearInterval(reconcileTimer);
      shutdown.abort();
      retention.stop();
      if (connection.status === "ready") {
        // The steps in flight hand their runs back to the queue, and BullMQ waits for them. If
        // Redis goes away meanwhile, that wait would never end: the connection's end ends it.
        await Promise.race([worker.close(), new Promise((ended) => connection.once("end", ended))]);
      } else {
        // Redis is not there: nothing can be handed back (the jobs' locks lapse, and another
        // worker takes them up), and BullMQ's graceful close would wait for it for ever.
        await worker.close(true);
      }
      await Promise.allSettled(steps);
      await reconciling;
      await retention.pruning;
      await closeSnapshotsOf(resources);
      await queue.close();
      await subscriber.quit().catch(() => subscriber.disconnect());
      await connection.quit().catch(() => connection.disconnect());
      await storage.close();
      logger.info("looprun worker closed");
    },
  };
}
