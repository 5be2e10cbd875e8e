import { z } from "zod";

/** The BullMQ queue that carries runs. */
export const RUN_QUEUE = "looprun-runs";

/** The one job name: drive the run with this id one step further. Job id = run id. */
export const RunJob = z.object({ runId: z.string().min(1) });
export type RunJob = z.infer<typeof RunJob>;

export const RUN_JOB_NAME = "run";

/** Options of every run job (BullMQ `JobsOptions`); the job id is the run id. */
export function runJobOptions(runId: string) {
  return {
    jobId: runId,
    // Retries cover unexpected processor errors; the engine handles a run's own failures.
    attempts: 3,
    backoff: { type: "exponential" as const, delay: 1000 },
    removeOnComplete: { age: 3600, count: 1000 },
    removeOnFail: { age: 7 * 24 * 3600 },
  };
}

/** Redis pub/sub channel that carries stop requests to the worker holding a run. */
export function stopChannel(prefix: string): string {
  return `${prefix}:looprun:stop`;
}
