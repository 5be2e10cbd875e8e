import type { Redis } from "ioredis";

/**
 * BullMQ counts a job's stalls (its worker died holding it) in the job's hash, field `stc`
 * (moveStalledJobsToWait), and never resets it: a run's job lives from step to step, so three
 * crashes anywhere in a long run would fail it as a poison run. The worker resets the count
 * once a resumed run has moved on — a poison run, which never gets past its crash, is still
 * failed by the third one (and by the engine's own limit of attempts per iteration).
 */
const FORGET_STALLS = `if redis.call("EXISTS", KEYS[1]) == 1 then
  redis.call("HSET", KEYS[1], "stc", 0)
end`;

/** Sets the stall count of the job at `jobKey` (`worker.toKey(job.id)`) back to 0, if it exists. */
export async function forgetStalls(redis: Redis, jobKey: string): Promise<void> {
  await redis.eval(FORGET_STALLS, 1, jobKey);
}

/**
 * The step's `onProgress` for a job that stalled before (`stalledCounter` > 0 as it was
 * taken): forgets those stalls at the first iteration decided, once. Failures are only logged:
 * the count then stays as BullMQ keeps it.
 */
export function forgetStallsOnProgress(
  stalledBefore: number,
  forget: () => Promise<unknown>,
  onError: (err: unknown) => void,
): (() => void) | undefined {
  if (stalledBefore === 0) return undefined;
  let done = false;
  return () => {
    if (done) return;
    done = true;
    forget().catch(onError);
  };
}
