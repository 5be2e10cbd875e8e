// A long run meets crashes in different iterations (restarts, OOM kills): each is resumed, and
// none counts against the next once the run has moved on. The poison run, which never gets
// past its crash, is failed at the third: e2e-durability.test.ts.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  countEvents,
  ensureWorkers,
  expectIterationsOnce,
  FAST_RECOVERY,
  WORKER_ENV,
  withWorkersKeptAlive,
} from "./support/cluster";
import {
  commandRun,
  expectWellFormedEvents,
  getEvents,
  getIterations,
  type Stack,
  startStack,
  submit,
  waitForStatus,
} from "./support/stack";

/** Kills its worker the first time each iteration runs; the test passes at the fourth line. */
const CRASH_ONCE_PER_ITERATION = [
  'if [ ! -e "crashed-$LOOPRUN_ITERATION" ]; then',
  '  touch "crashed-$LOOPRUN_ITERATION"; kill -9 $LOOPRUN_WORKER_PID; sleep 5; exit 0',
  "fi",
  "echo x >> lines",
].join("\n");

describe("a run whose workers die in several of its iterations", () => {
  let stack: Stack;

  beforeAll(async () => {
    stack = await startStack({ redisUrl: inject("redisUrl"), workers: 0, env: FAST_RECOVERY });
    ensureWorkers(stack, 2, WORKER_ENV);
  });

  afterAll(async () => {
    await stack?.stop();
  });

  it.each([0, 300])(
    "resumes each crashed iteration and succeeds: 4 crashes, one per iteration (cooldown %i ms)",
    { timeout: 240_000 },
    async (cooldownMs) => {
      const { id } = await submit(
        stack,
        commandRun(CRASH_ONCE_PER_ITERATION, {
          sessionId: `crash-progress-${cooldownMs}-${Date.now()}`,
          testCommand: '[ "$(wc -l < lines)" -ge 4 ]',
          maxIterations: 6,
          cooldownMs,
        }),
      );
      // Workers are started again as they die.
      const run = await withWorkersKeptAlive(stack, 2, WORKER_ENV, () =>
        waitForStatus(stack, id, undefined, { timeoutMs: 200_000 }),
      );
      // BullMQ's count of the job's stalls is reset as each resumed iteration is decided: the
      // third crash no longer fails the run as "job stalled more than allowable limit".
      expect(run, run.summary ?? undefined).toMatchObject({
        status: "succeeded",
        reason: "success",
      });
      const rows = expectIterationsOnce(await getIterations(stack, id));
      expect(rows).toEqual([
        [1, 1, "abandoned"],
        [1, 2, "failed"],
        [2, 1, "abandoned"],
        [2, 2, "failed"],
        [3, 1, "abandoned"],
        [3, 2, "failed"],
        [4, 1, "abandoned"],
        [4, 2, "passed"],
      ]);
      const events = await getEvents(stack, id);
      expectWellFormedEvents(events);
      expect(countEvents(events, "run_resumed")).toBe(4);
      expect(countEvents(events, "run_finished")).toBe(1);
    },
  );
});
