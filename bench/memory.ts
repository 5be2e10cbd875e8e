import { randomBytes } from "node:crypto";
import type { BenchContext } from "./support/context";
import { type BenchStack, commandRun, startStack, submitRun, waitForIdle } from "./support/looprun";
import { rssMb, sleep } from "./support/processes";
import type { Figure, ScenarioResult } from "./support/report";
import { median, pairedRatios, summarize } from "./support/stats";

const IDLE_GOAL_MB = 120;
const GROWTH_GOAL = 1.2;

/** RSS of a process: the median of a few readings a moment apart. */
async function sampleRss(pid: number): Promise<number> {
  const readings: number[] = [];
  for (let i = 0; i < 5; i++) {
    readings.push(rssMb(pid));
    await sleep(200);
  }
  return median(readings);
}

/** Submits `count` trivial runs (20 submits in flight) and waits until every run has ended. */
async function runMany(stack: BenchStack, count: number): Promise<void> {
  const tag = randomBytes(4).toString("hex");
  let next = 0;
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      while (next < count) {
        const i = next++;
        await submitRun(stack.url, commandRun("true", "true", { sessionId: `mem-${tag}-${i}` }));
      }
    }),
  );
  await waitForIdle(stack.url, 30 * 60_000);
}

interface MemorySample {
  apiIdle: number;
  workerIdle: number;
  apiWarm: number;
  workerWarm: number;
  apiAfter: number;
  workerAfter: number;
}

async function measureOnce(
  ctx: BenchContext,
  runs: number,
  warmRuns: number,
  settleMs: number,
): Promise<MemorySample> {
  const stack = await startStack({ redisUrl: ctx.redis.url });
  try {
    const worker = await stack.startWorker();
    await sleep(settleMs);
    const apiIdle = await sampleRss(stack.api.pid);
    const workerIdle = await sampleRss(worker.pid);
    await runMany(stack, warmRuns);
    await sleep(settleMs);
    const apiWarm = await sampleRss(stack.api.pid);
    const workerWarm = await sampleRss(worker.pid);
    await runMany(stack, runs - warmRuns);
    await sleep(settleMs);
    const apiAfter = await sampleRss(stack.api.pid);
    const workerAfter = await sampleRss(worker.pid);
    return { apiIdle, workerIdle, apiWarm, workerWarm, apiAfter, workerAfter };
  } finally {
    await stack.stop();
  }
}

/** 6. Idle RSS of the API and a worker, and their growth over 1,000 runs. */
export async function memory(ctx: BenchContext): Promise<ScenarioResult> {
  const runs = ctx.quick ? 100 : 1000;
  const warmRuns = ctx.quick ? 25 : 100;
  const reps = ctx.quick ? 1 : Math.min(ctx.reps, 2);
  const settleMs = ctx.quick ? 2000 : 10_000;
  const samples: MemorySample[] = [];
  for (let rep = 0; rep < reps; rep++) {
    samples.push(await measureOnce(ctx, runs, warmRuns, settleMs));
    const s = samples.at(-1);
    ctx.log(
      `  rep ${rep + 1}: api ${s?.apiIdle.toFixed(0)} → ${s?.apiWarm.toFixed(0)} → ${s?.apiAfter.toFixed(0)} MB, worker ${s?.workerIdle.toFixed(0)} → ${s?.workerWarm.toFixed(0)} → ${s?.workerAfter.toFixed(0)} MB`,
    );
  }
  const col = (f: (s: MemorySample) => number) => samples.map(f);
  const figures: Figure[] = [];
  for (const [who, idle, warm, after] of [
    [
      "API",
      (s: MemorySample) => s.apiIdle,
      (s: MemorySample) => s.apiWarm,
      (s: MemorySample) => s.apiAfter,
    ],
    [
      "worker",
      (s: MemorySample) => s.workerIdle,
      (s: MemorySample) => s.workerWarm,
      (s: MemorySample) => s.workerAfter,
    ],
  ] as const) {
    const idleRss = summarize(col(idle));
    const growth = summarize(pairedRatios(col(after), col(idle)));
    figures.push(
      {
        name: `${who} idle RSS`,
        unit: "MB",
        digits: 0,
        looprun: idleRss,
        goal: `≤ ${IDLE_GOAL_MB} MB`,
        met: idleRss.median <= IDLE_GOAL_MB,
      },
      {
        name: `${who} RSS after ${runs} runs`,
        unit: "MB",
        digits: 0,
        looprun: summarize(col(after)),
        baseline: { name: "idle", summary: idleRss },
        ratio: growth,
        goal: `≤ ${GROWTH_GOAL}× idle`,
        met: growth.median <= GROWTH_GOAL,
      },
      {
        name: `${who} RSS after ${runs} runs vs after the first ${warmRuns}`,
        unit: "MB",
        digits: 0,
        looprun: summarize(col(after)),
        baseline: { name: `after ${warmRuns}`, summary: summarize(col(warm)) },
        ratio: summarize(pairedRatios(col(after), col(warm))),
      },
    );
  }
  return {
    id: "memory",
    title: "6. Memory",
    figures,
    notes: [
      `${reps} repetition${reps === 1 ? "" : "s"}${ctx.quick ? " (--quick: 100 runs, not 1,000)" : ""}, each with a fresh API and one worker process (WORKER_CONCURRENCY=2, the default) as \`node apps/cli/bin/looprun.js api|worker\` start them (through tsx, no --expose-gc: measured as is).`,
      `RSS is VmRSS from /proc/<pid>/status, the median of 5 readings 200 ms apart, taken ${settleMs / 1000} s after the processes went idle: at start-up ("idle"), after the first ${warmRuns} runs, and after all ${runs} (trivial runs: agent \`true\`, test \`true\`, 20 submits in flight).`,
      "The growth goal compares the end with the idle start; the last row compares it with the state after the first runs (code compiled, pools and caches filled), which isolates growth that keeps going.",
    ],
  };
}
