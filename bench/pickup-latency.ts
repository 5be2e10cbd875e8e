import { randomBytes } from "node:crypto";
import { RUN_QUEUE } from "@looprun/core";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import type { BenchContext } from "./support/context";
import {
  type BenchStack,
  commandRun,
  runEvents,
  startStack,
  submitRun,
  waitForSuccess,
} from "./support/looprun";
import { type BenchProcess, sleep, spawnTs } from "./support/processes";
import type { ScenarioResult } from "./support/report";
import { pairedRatios, percentile, summarize } from "./support/stats";

interface Pickup {
  /** run_queued → run_started. */
  total: number;
  /** run_queued → the job's timestamp (`Queue.add` called in the API). */
  api: number;
  /** The job's timestamp → its processedOn (BullMQ moved it to active). */
  queue: number;
  /** processedOn → run_started (the worker claims and starts the run). */
  worker: number;
}

/** run_queued → run_started of one run, from the stored events (ms), and where it went. */
async function looprunPickup(stack: BenchStack, jobs: Queue): Promise<Pickup> {
  const id = await submitRun(stack.url, commandRun("true", "true"));
  await waitForSuccess(stack.url, id, { intervalMs: 20 });
  const events = await runEvents(stack.url, id);
  const at = (type: string) => {
    const e = events.find((x) => x.type === type);
    if (!e) throw new Error(`run ${id} has no ${type} event`);
    return Date.parse(e.at);
  };
  const job = await jobs.getJob(id);
  const added = job?.timestamp ?? Number.NaN;
  const processed = job?.processedOn ?? Number.NaN;
  const queued = at("run_queued");
  const started = at("run_started");
  return {
    total: started - queued,
    api: added - queued,
    queue: processed - added,
    worker: started - processed,
  };
}

/** Raw BullMQ: `Queue.add` → the processor's first line, both on the epoch clock (ms). */
class RawPickup {
  private readonly waiting = new Map<string, (at: number) => void>();
  private n = 0;

  constructor(
    private readonly queue: Queue,
    worker: BenchProcess,
  ) {
    worker.onLine((line) => {
      const m = /^start (\S+) (\S+)$/.exec(line);
      if (m?.[1] && m[2]) this.waiting.get(m[1])?.(Number(m[2]));
    });
  }

  async sample(): Promise<number> {
    const jobId = `raw-${++this.n}`;
    const started = new Promise<number>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`raw job ${jobId} not started in 30 s`)),
        30_000,
      );
      this.waiting.set(jobId, (at) => {
        clearTimeout(timer);
        this.waiting.delete(jobId);
        resolve(at);
      });
    });
    const t0 = performance.timeOrigin + performance.now();
    await this.queue.add("job", { n: this.n }, { jobId, removeOnComplete: true });
    return (await started) - t0;
  }
}

/** 3. run_queued → run_started vs BullMQ add → processor start, same Redis, side by side. */
export async function pickupLatency(ctx: BenchContext): Promise<ScenarioResult> {
  const samples = ctx.quick ? 10 : 25;
  const stack = await startStack({ redisUrl: ctx.redis.url });
  const prefix = `bench-raw-${randomBytes(4).toString("hex")}`;
  const raw = spawnTs("raw bullmq worker", "bench/baselines/raw-bullmq-worker.ts", {
    REDIS_URL: ctx.redis.url,
    QUEUE_PREFIX: prefix,
    QUEUE_NAME: "raw",
    CONCURRENCY: "2",
  });
  const connection = new Redis(ctx.redis.url, { maxRetriesPerRequest: null });
  const queue = new Queue("raw", { connection, prefix });
  const jobs = new Queue(RUN_QUEUE, { connection, prefix: stack.prefix });
  const parts: Pickup[] = [];
  const p50: number[] = [];
  const rawP50: number[] = [];
  const p90: number[] = [];
  const rawP90: number[] = [];
  try {
    await Promise.all([stack.startWorker(), raw.waitForLine((line) => line === "ready", 60_000)]);
    const rawPickup = new RawPickup(queue, raw);
    for (let i = 0; i < 3; i++) {
      await looprunPickup(stack, jobs);
      await rawPickup.sample();
    }
    for (let rep = 0; rep < ctx.reps; rep++) {
      const ours: number[] = [];
      const base: number[] = [];
      // Interleaved, one at a time, each worker idle when its job comes.
      for (let i = 0; i < samples; i++) {
        const sample = await looprunPickup(stack, jobs);
        parts.push(sample);
        ours.push(sample.total);
        await sleep(20);
        base.push(await rawPickup.sample());
        await sleep(20);
      }
      p50.push(percentile(ours, 50));
      rawP50.push(percentile(base, 50));
      p90.push(percentile(ours, 90));
      rawP90.push(percentile(base, 90));
      ctx.log(
        `  rep ${rep + 1}: looprun p50 ${p50.at(-1)?.toFixed(1)} ms p90 ${p90.at(-1)?.toFixed(1)}; raw p50 ${rawP50.at(-1)?.toFixed(2)} ms p90 ${rawP90.at(-1)?.toFixed(2)}`,
      );
    }
  } finally {
    await jobs.close();
    await queue.close();
    connection.disconnect();
    await Promise.all([stack.stop(), raw.stop()]);
  }
  const ratio = summarize(pairedRatios(p50, rawP50));
  return {
    id: "pickup-latency",
    title: "3. Pickup latency",
    figures: [
      {
        name: "queued → started p50",
        unit: "ms",
        digits: 2,
        looprun: summarize(p50),
        baseline: { name: "raw BullMQ", summary: summarize(rawP50) },
        ratio,
        goal: "≤ 2× raw",
        met: ratio.median <= 2,
      },
      {
        name: "queued → started p90",
        unit: "ms",
        digits: 2,
        looprun: summarize(p90),
        baseline: { name: "raw BullMQ", summary: summarize(rawP90) },
        ratio: summarize(pairedRatios(p90, rawP90)),
      },
      ...(
        [
          ["API: run_queued → Queue.add", (p: Pickup) => p.api],
          ["BullMQ: Queue.add → active", (p: Pickup) => p.queue],
          ["worker: active → run_started", (p: Pickup) => p.worker],
        ] as const
      ).map(([name, f]) => ({
        name: `looprun breakdown, ${name} (per sample)`,
        unit: "ms",
        digits: 1,
        looprun: summarize(parts.map(f)),
      })),
    ],
    notes: [
      `${samples} runs per repetition, one at a time (each submitted once the previous one finished, so the worker is idle), interleaved with as many raw BullMQ jobs; 3 warm-up samples of each not recorded.`,
      "looprun: `at` of the run_started event minus `at` of run_queued (stored, whole milliseconds). run_queued is stamped before the submit's transaction, so this covers that transaction (its fsync runs in the thread pool while `Queue.add` goes to Redis), `Queue.add`, the worker's pickup, the claim transaction and the start transaction (the worker's, synchronous=NORMAL: no fsync).",
      "The breakdown uses the BullMQ job's own timestamps (`timestamp`: when the API called `Queue.add`; `processedOn`: when a worker took it), whole milliseconds; its median and min–max are over all samples, not repetitions.",
      "Raw BullMQ (bench/baselines/raw-bullmq-worker.ts, its own process, concurrency 2 like the looprun worker, same Redis): from just before `Queue.add` in the bench process to the first line of the processor, on the epoch clock with sub-millisecond resolution.",
    ],
  };
}
