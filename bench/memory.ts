import { randomBytes } from "node:crypto";
import type { BenchContext } from "./support/context";
import { type BenchStack, commandRun, startStack, submitRun, waitForIdle } from "./support/looprun";
import { childPids, memoryMb, rssMb, sleep } from "./support/processes";
import type { Figure, ScenarioResult } from "./support/report";
import { pairedRatios, summarize } from "./support/stats";

const IDLE_GOAL_MB = 120;
const GROWTH_GOAL = 1.2;
/** Readings this far apart; settled once the last three of every process agree within 2 MB. */
const READING_EVERY_MS = 5000;
const SETTLED_WITHIN_MB = 2;

interface Settle {
  /** Never settled before this long (V8 shrinks its heap only after a while idle). */
  minMs: number;
  /** Taken as it is after this long, settled or not. */
  maxMs: number;
}

/** RSS (MB) of each process once it has settled while idle (or after `maxMs`). */
async function settledRss(pids: readonly number[], settle: Settle): Promise<number[]> {
  const started = Date.now();
  const readings: number[][] = [];
  for (;;) {
    await sleep(READING_EVERY_MS);
    readings.push(pids.map(rssMb));
    const last = readings.slice(-3);
    const stable =
      last.length === 3 &&
      pids.every((_, i) => {
        const values = last.map((r) => r[i] ?? Number.NaN);
        return Math.max(...values) - Math.min(...values) <= SETTLED_WITHIN_MB;
      });
    const elapsed = Date.now() - started;
    if ((stable && elapsed >= settle.minMs) || elapsed >= settle.maxMs)
      return readings.at(-1) ?? [];
  }
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

/** [API, worker] RSS in MB at each point. */
interface MemorySample {
  startup: number[];
  idle: number[];
  warm: number[];
  after: number[];
  /** The worker's launcher (started with its first command) at the end: RSS and own memory. */
  launcher: { rss: number; own: number };
}

async function measureOnce(
  ctx: BenchContext,
  runs: number,
  warmRuns: number,
  settle: Settle,
): Promise<MemorySample> {
  const stack = await startStack({ redisUrl: ctx.redis.url });
  try {
    const worker = await stack.startWorker();
    const pids = [stack.api.pid, worker.pid];
    await sleep(10_000);
    const startup = pids.map(rssMb);
    const idle = await settledRss(pids, settle);
    await runMany(stack, warmRuns);
    const warm = await settledRss(pids, settle);
    await runMany(stack, runs - warmRuns);
    const after = await settledRss(pids, settle);
    const [launcher] = childPids(worker.pid, "launcher-main");
    const launcherMb = launcher === undefined ? { rss: 0, own: 0 } : memoryMb(launcher);
    return { startup, idle, warm, after, launcher: launcherMb };
  } finally {
    await stack.stop();
  }
}

/** 6. Idle RSS of the API and a worker, and their growth over 1,000 runs. */
export async function memory(ctx: BenchContext): Promise<ScenarioResult> {
  const runs = ctx.quick ? 100 : 1000;
  const warmRuns = ctx.quick ? 25 : 100;
  const reps = ctx.quick ? 1 : Math.min(ctx.reps, 2);
  const settle: Settle = ctx.quick
    ? { minMs: 15_000, maxMs: 30_000 }
    : { minMs: 45_000, maxMs: 120_000 };
  const samples: MemorySample[] = [];
  for (let rep = 0; rep < reps; rep++) {
    const s = await measureOnce(ctx, runs, warmRuns, settle);
    samples.push(s);
    const mb = (list: number[], i: number) => (list[i] ?? Number.NaN).toFixed(0);
    ctx.log(
      `  rep ${rep + 1}: api ${mb(s.startup, 0)} (start-up) → ${mb(s.idle, 0)} (idle) → ${mb(s.warm, 0)} → ${mb(s.after, 0)} MB, worker ${mb(s.startup, 1)} → ${mb(s.idle, 1)} → ${mb(s.warm, 1)} → ${mb(s.after, 1)} MB`,
    );
  }
  const figures: Figure[] = [];
  for (const [who, i] of [
    ["API", 0],
    ["worker", 1],
  ] as const) {
    const col = (point: Exclude<keyof MemorySample, "launcher">) =>
      samples.map((s) => s[point][i] ?? Number.NaN);
    const idle = summarize(col("idle"));
    const growth = summarize(pairedRatios(col("after"), col("idle")));
    figures.push(
      {
        name: `${who} RSS at start-up (10 s after ready)`,
        unit: "MB",
        digits: 0,
        looprun: summarize(col("startup")),
      },
      {
        name: `${who} idle RSS (settled)`,
        unit: "MB",
        digits: 0,
        looprun: idle,
        goal: `≤ ${IDLE_GOAL_MB} MB`,
        met: idle.median <= IDLE_GOAL_MB,
      },
      {
        name: `${who} RSS after ${runs} runs`,
        unit: "MB",
        digits: 0,
        looprun: summarize(col("after")),
        baseline: { name: "idle", summary: idle },
        ratio: growth,
        goal: `≤ ${GROWTH_GOAL}× idle`,
        met: growth.median <= GROWTH_GOAL,
      },
      {
        name: `${who} RSS after ${runs} runs vs after the first ${warmRuns}`,
        unit: "MB",
        digits: 0,
        looprun: summarize(col("after")),
        baseline: { name: `after ${warmRuns}`, summary: summarize(col("warm")) },
        ratio: summarize(pairedRatios(col("after"), col("warm"))),
      },
    );
  }
  // Where the spawn addon is built, a worker spawns its commands itself: no launcher to read.
  const withALauncher = samples.filter((s) => s.launcher.rss > 0);
  const hasLauncher = withALauncher.length > 0;
  if (hasLauncher) {
    const launcherRss = summarize(withALauncher.map((s) => s.launcher.rss));
    const launcherOwn = summarize(withALauncher.map((s) => s.launcher.own));
    const withLauncher = summarize(
      withALauncher.map((s) => (s.after[1] ?? Number.NaN) + s.launcher.own),
    );
    figures.push(
      {
        name: `worker's launcher process (spawns its commands) after ${runs} runs: RSS`,
        unit: "MB",
        digits: 0,
        looprun: launcherRss,
      },
      {
        name: `worker's launcher: its own memory (anonymous; the rest of its RSS is the node binary's pages, shared with the worker)`,
        unit: "MB",
        digits: 0,
        looprun: launcherOwn,
      },
      {
        name: `worker RSS + its launcher's own memory, after ${runs} runs`,
        unit: "MB",
        digits: 0,
        looprun: withLauncher,
        goal: `≤ ${IDLE_GOAL_MB} MB`,
        met: withLauncher.median <= IDLE_GOAL_MB,
      },
    );
  }
  return {
    id: "memory",
    title: "6. Memory",
    figures,
    notes: [
      `${reps} repetition${reps === 1 ? "" : "s"}${ctx.quick ? " (--quick: 100 runs, not 1,000, and shorter settling)" : ""}, each with a fresh API and one worker process (WORKER_CONCURRENCY=2, the default) as \`node apps/cli/bin/looprun.js api|worker\` start them (from the bundle it builds at start, see apps/cli/bin/bundle.js; no --expose-gc: measured as is).`,
      `RSS is VmRSS from /proc/<pid>/status. "Start-up" is read 10 s after the worker is ready. The other points are read once the processes have settled while idle: a reading every ${READING_EVERY_MS / 1000} s until the last three of each process agree within ${SETTLED_WITHIN_MB} MB, after at least ${settle.minMs / 1000} s and at most ${settle.maxMs / 1000} s — V8 gives the memory of start-up (module loading, compilation) back only after some 30 s idle, so the start-up reading is a transient peak, not what an idle process holds.`,
      hasLauncher
        ? "A worker spawns its commands through a launcher, a small Node process it starts with its first command (packages/core/src/process/launch.ts; the spawn addon was not built): it is not there at the idle points, and is read at the end — its RSS, and its anonymous memory, the part no other process shares (smaps_rollup)."
        : "A worker spawns its commands itself, through posix_spawn (packages/spawn): no launcher process runs beside it.",
      `Points: idle before any run, after the first ${warmRuns} runs, after all ${runs} (trivial runs: agent \`true\`, test \`true\`, 20 submits in flight). The growth goal compares the end with the idle start; the last row compares it with the state after the first runs (code compiled, pools and caches filled), which isolates growth that keeps going.`,
    ],
  };
}
