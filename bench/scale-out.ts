import { randomBytes } from "node:crypto";
import { availableParallelism } from "node:os";
import type { BenchContext } from "./support/context";
import {
  api,
  type BenchStack,
  commandRun,
  type RunView,
  startStack,
  submitRun,
  waitForIdle,
} from "./support/looprun";
import { childPids, cpuMs } from "./support/processes";
import type { ScenarioResult } from "./support/report";
import { pairedRatios, summarize } from "./support/stats";

const WORKER_COUNTS = [1, 2, 4] as const;

interface BatchResult {
  runsPerSecond: number;
  /** CPU time per run of the API, the workers (with their commands) and Redis. */
  cpuMsPerRun: number;
}

/**
 * Everything a run uses CPU in: the API, the workers and their commands, Redis. A worker's
 * commands are its children (posix_spawn), or its launcher's where the spawn addon is not
 * built (packages/core/src/process/launch.ts): a process's CPU counts with the commands it
 * waited for.
 */
function stackCpuMs(ctx: BenchContext, stack: BenchStack): number {
  const workers = stack.workers.map((w) => w.pid);
  const launchers = workers.flatMap((pid) => childPids(pid, "launcher-main"));
  return [ctx.redis.process.pid, stack.api.pid, ...workers, ...launchers].reduce(
    (n, pid) => n + cpuMs(pid),
    0,
  );
}

/** Submits `count` I/O-bound runs at once; runs per second until the last one ended. */
export async function batch(
  ctx: BenchContext,
  stack: BenchStack,
  count: number,
): Promise<BatchResult> {
  const tag = randomBytes(4).toString("hex");
  const cpu0 = stackCpuMs(ctx, stack);
  const t0 = Date.now();
  const ids: string[] = [];
  // 20 submits in flight: the API is not what this measures.
  let next = 0;
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      while (next < count) {
        const i = next++;
        ids.push(
          await submitRun(
            stack.url,
            commandRun("sleep 0.2", "true", { sessionId: `so-${tag}-${i}` }),
          ),
        );
      }
    }),
  );
  await waitForIdle(stack.url, 300_000);
  let last = 0;
  for (const id of ids) {
    const run = (await api(stack.url, "GET", `/api/runs/${id}`)).body as RunView;
    if (run.status !== "succeeded") {
      const its = (await api(stack.url, "GET", `/api/runs/${id}/iterations`)).body.items;
      throw new Error(
        `run ${id} ended ${run.status} (${run.reason}: ${run.summary}); iterations: ${JSON.stringify(its).slice(0, 3000)}`,
      );
    }
    last = Math.max(last, Date.parse(run.finishedAt ?? ""));
  }
  return {
    runsPerSecond: (count * 1000) / (last - t0),
    cpuMsPerRun: (stackCpuMs(ctx, stack) - cpu0) / count,
  };
}

/** 4. Runs per second of I/O-bound runs with 1, 2 and 4 worker processes. */
export async function scaleOut(ctx: BenchContext): Promise<ScenarioResult> {
  const perWorker = ctx.quick ? 5 : 20;
  const stack = await startStack({ redisUrl: ctx.redis.url });
  const rates: Record<number, number[]> = { 1: [], 2: [], 4: [] };
  const cpu: number[] = [];
  try {
    // Warm-up: the API's submit path and one worker's first runs.
    await stack.startWorker({ WORKER_CONCURRENCY: "1" });
    await batch(ctx, stack, 4);
    await stack.stopWorkers();
    for (let rep = 0; rep < ctx.reps; rep++) {
      for (const workers of WORKER_COUNTS) {
        await Promise.all(
          Array.from({ length: workers }, () => stack.startWorker({ WORKER_CONCURRENCY: "1" })),
        );
        const result = await batch(ctx, stack, perWorker * workers);
        rates[workers]?.push(result.runsPerSecond);
        cpu.push(result.cpuMsPerRun);
        await stack.stopWorkers();
      }
      ctx.log(
        `  rep ${rep + 1}: ${WORKER_COUNTS.map((w) => `${w}w ${rates[w]?.at(-1)?.toFixed(2)} runs/s`).join(", ")}`,
      );
    }
  } finally {
    await stack.stop();
  }
  const one = rates[1] ?? [];
  const figures: ScenarioResult["figures"] = [
    { name: "1 worker", unit: "runs/s", digits: 2, looprun: summarize(one) },
  ];
  for (const workers of [2, 4] as const) {
    const list = rates[workers] ?? [];
    const ratio = summarize(pairedRatios(list, one));
    figures.push({
      name: `${workers} workers`,
      unit: "runs/s",
      digits: 2,
      looprun: summarize(list),
      baseline: { name: "1 worker", summary: summarize(one) },
      ratio,
      ...(workers === 4 ? { goal: "≥ 3.5× 1 worker", met: ratio.median >= 3.5 } : {}),
    });
  }
  const cpuPerRun = summarize(cpu);
  figures.push({
    name: "CPU time per run (API + workers with their commands + Redis)",
    unit: "ms",
    digits: 0,
    looprun: cpuPerRun,
  });
  const bound = (availableParallelism() * 1000) / cpuPerRun.median;
  return {
    id: "scale-out",
    title: "4. Scale-out",
    figures,
    notes: [
      `I/O-bound runs: agent \`sleep 0.2\`, test \`true\`, one iteration each. ${perWorker} runs per worker process (so ${perWorker}, ${perWorker * 2} and ${perWorker * 4}), submitted at once (20 in flight) to idle workers with WORKER_CONCURRENCY=1 each, one API; runs/s = runs / (last finishedAt − first submit).`,
      "The workers are started fresh for each measurement (after they report ready) and stopped after it; the API, Redis and the database stay.",
      `CPU per run is measured from /proc (utime+stime of the API, the workers (and their launchers, where the spawn addon is not built) and Redis, with the children they waited for: agent, test and git commands) over every batch. At ${cpuPerRun.median.toFixed(0)} ms of CPU per run, ${availableParallelism()} cores cannot finish more than about ${bound.toFixed(1)} runs/s whatever the number of workers — ${(bound / (rates[1] ? summarize(rates[1]).median : Number.NaN)).toFixed(1)}× one worker's rate here.`,
      "One worker (WORKER_CONCURRENCY=1) finishes at most 5 runs/s (1 / 0.2 s of sleep); what a run costs beyond the sleep (the API, the worker's commits, its spawns of the agent, the test and git) is CPU, and this machine has 2 cores for the API, Redis, the workers, their commands and the bench itself.",
    ],
  };
}
