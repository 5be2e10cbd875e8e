import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { BenchContext } from "./support/context";
import { type LoadOptions, type LoadResult, runLoad } from "./support/load";
import { startStack } from "./support/looprun";
import { benchPostgresDatabase, POSTGRES_NOTE } from "./support/postgres";
import {
  freePort,
  machineTicks,
  removeTempDir,
  spawnTs,
  tempDir,
  threadCpuMs,
} from "./support/processes";
import type { ScenarioResult } from "./support/report";
import { pairedRatios, summarize } from "./support/stats";

const CONCURRENCY = 20;

type Phase = "warm-up" | "measured" | "warming";

/** Requests of each phase (`warming`: between the first measurement and the second). */
const REQUESTS: Record<"full" | "quick", Record<Phase, number>> = {
  full: { "warm-up": 200, measured: 2000, warming: 4000 },
  quick: { "warm-up": 200, measured: 600, warming: 1000 },
};

const requestsOf = (ctx: BenchContext) => REQUESTS[ctx.quick ? "quick" : "full"];

/** Distinct sessions, a trivial command agent and test: the smallest realistic submit. */
function submitBody(tag: string) {
  return (i: number) =>
    JSON.stringify({
      task: "bench submit",
      sessionId: `${tag}-${i}`,
      agent: { type: "command", command: "true" },
      testCommand: "true",
    });
}

function loadOptions(ctx: BenchContext, baseUrl: string, phase: Phase): LoadOptions {
  const tag = randomBytes(4).toString("hex");
  return {
    baseUrl,
    method: "POST",
    path: "/api/runs",
    concurrency: CONCURRENCY,
    requests: requestsOf(ctx)[phase],
    maxMs: phase === "warm-up" || ctx.quick ? 10_000 : 30_000,
    body: submitBody(`${phase[0]}-${tag}`),
  };
}

/** A measurement, with where the server's CPU went meanwhile and how busy the machine was. */
interface Sample extends LoadResult {
  /** CPU per request of the server's main thread (its JavaScript) [ms]. */
  mainCpuMs: number;
  /** CPU per request of its other threads: V8's compiler and GC helpers, libuv's pool [ms]. */
  otherCpuMs: number;
  /** The share of all the machine's cores busy (any process) [%]. */
  machineBusy: number;
}

/** A process's two measurements: just after its warm-up, and once it has served thousands. */
interface Measured {
  fresh: Sample;
  warm: Sample;
}

/** Where the server's CPU went, and the machine's: name, unit, value, digits. */
const CPU_FIGURES: [string, string, (r: Sample) => number, number][] = [
  ["server CPU per request, main thread", "ms", (r) => r.mainCpuMs, 2],
  ["server CPU per request, its other threads", "ms", (r) => r.otherCpuMs, 2],
  ["machine busy (all cores, any process)", "%", (r) => r.machineBusy, 0],
];

async function sample(opts: LoadOptions, pid: number): Promise<Sample> {
  const cpu0 = threadCpuMs(pid);
  const machine0 = machineTicks();
  const load = await runLoad(opts);
  const cpu1 = threadCpuMs(pid);
  const machine1 = machineTicks();
  return {
    ...load,
    mainCpuMs: (cpu1.main - cpu0.main) / load.completed,
    otherCpuMs: (cpu1.others - cpu0.others) / load.completed,
    machineBusy: (100 * (machine1.busy - machine0.busy)) / (machine1.total - machine0.total),
  };
}

/**
 * The warm-up, the first measurement, the warming requests, the second measurement: a fresh
 * process's code is still being optimised by V8 over its first few thousand requests (the API's
 * CPU per submit fell from ~1.4 to ~0.4 ms over them, bench/RESULTS.md), a running service's is
 * not.
 */
async function measurePhases(
  what: string,
  ctx: BenchContext,
  url: string,
  pid: number,
): Promise<Measured> {
  checkErrors(`${what} warm-up`, await runLoad(loadOptions(ctx, url, "warm-up")));
  const fresh = await sample(loadOptions(ctx, url, "measured"), pid);
  checkErrors(what, fresh);
  checkErrors(`${what} warming`, await runLoad(loadOptions(ctx, url, "warming")));
  const warm = await sample(loadOptions(ctx, url, "measured"), pid);
  checkErrors(`${what} (warm)`, warm);
  return { fresh, warm };
}

function checkErrors(what: string, r: LoadResult): void {
  const errors = Object.entries(r.errors);
  if (errors.length > 0) throw new Error(`${what}: non-2xx answers ${JSON.stringify(r.errors)}`);
}

type Engine = "sqlite" | "postgres";

/** A fresh database of the engine for one repetition: its environment, and how to drop it. */
async function freshDatabase(
  engine: Engine,
  dir: string,
  name: string,
): Promise<{ env: Record<string, string>; drop(): Promise<void> }> {
  if (engine === "sqlite")
    return { env: { DATABASE_PATH: join(dir, `${name}.db`) }, drop: async () => {} };
  const database = await benchPostgresDatabase(name);
  return { env: { DATABASE_URL: database.url }, drop: () => database.drop() };
}

export async function measureLooprun(ctx: BenchContext, engine: Engine): Promise<Measured> {
  // No workers: the API alone is measured (the jobs wait in Redis).
  const dir = tempDir("looprun-bench-submit-");
  const database = await freshDatabase(engine, dir, "submit");
  const stack = await startStack({ redisUrl: ctx.redis.url, env: database.env });
  try {
    return await measurePhases("looprun", ctx, stack.url, stack.api.pid);
  } finally {
    await stack.stop();
    await database.drop();
    removeTempDir(dir);
  }
}

export async function measureBaseline(ctx: BenchContext, engine: Engine): Promise<Measured> {
  const dir = tempDir("looprun-bench-baseline-");
  const port = await freePort();
  const database = await freshDatabase(engine, dir, "baseline");
  const server = spawnTs("baseline submit server", "bench/baselines/submit-server.ts", {
    PORT: String(port),
    ...database.env,
    REDIS_URL: ctx.redis.url,
    QUEUE_PREFIX: `bench-base-${randomBytes(4).toString("hex")}`,
  });
  try {
    await server.waitForLine((line) => line === "listening", 60_000);
    return await measurePhases("baseline", ctx, `http://127.0.0.1:${port}`, server.pid);
  } finally {
    await server.stop();
    await database.drop();
    removeTempDir(dir);
  }
}

/** 2. `POST /api/runs` at 20 requests in flight vs a bare Hono + SQLite insert + Queue.add. */
export function submitPath(ctx: BenchContext): Promise<ScenarioResult> {
  return submitOn(ctx, "sqlite");
}

/** 2b. The same on PostgreSQL, against the same bare handler with its insert in PostgreSQL. */
export function submitPathPostgres(ctx: BenchContext): Promise<ScenarioResult> {
  return submitOn(ctx, "postgres");
}

async function submitOn(ctx: BenchContext, engine: Engine): Promise<ScenarioResult> {
  const dbName = engine === "sqlite" ? "SQLite" : "PostgreSQL";
  const ours: Measured[] = [];
  const base: Measured[] = [];
  for (let rep = 0; rep < ctx.reps; rep++) {
    ours.push(await measureLooprun(ctx, engine));
    base.push(await measureBaseline(ctx, engine));
    const o = ours.at(-1);
    const b = base.at(-1);
    const line = (r: LoadResult | undefined) =>
      `${r?.throughput.toFixed(0)} req/s p50 ${r?.p50Ms.toFixed(1)} p99 ${r?.p99Ms.toFixed(1)} ms`;
    ctx.log(
      `  rep ${rep + 1}: looprun ${line(o?.fresh)}, warm ${line(o?.warm)}; baseline ${line(b?.fresh)}, warm ${line(b?.warm)}`,
    );
  }
  const figure = (name: string, unit: string, phase: keyof Measured, f: (r: Sample) => number) => {
    const mine = ours.map((m) => f(m[phase]));
    const theirs = base.map((m) => f(m[phase]));
    return {
      name,
      unit,
      looprun: summarize(mine),
      baseline: { name: `bare Hono+${dbName}+Queue.add`, summary: summarize(theirs) },
      ratio: summarize(pairedRatios(mine, theirs)),
    };
  };
  const throughput = figure("throughput", "req/s", "fresh", (r) => r.throughput);
  const p50 = figure("latency p50", "ms", "fresh", (r) => r.p50Ms);
  const p99 = figure("latency p99", "ms", "fresh", (r) => r.p99Ms);
  const n = requestsOf(ctx);
  const before = n["warm-up"] + n.measured + n.warming;
  const warm = `warm (after ${before.toLocaleString("en")} requests)`;
  return {
    id: engine === "sqlite" ? "submit-path" : "submit-path-postgres",
    title: engine === "sqlite" ? "2. Submit path" : "2b. Submit path, PostgreSQL",
    figures: [
      { ...throughput, digits: 0, goal: "≥ 0.70× baseline", met: throughput.ratio.median >= 0.7 },
      { ...p50, digits: 2 },
      { ...p99, digits: 2, goal: "≤ 25 ms", met: p99.looprun.median <= 25 },
      { ...figure(`throughput, ${warm}`, "req/s", "warm", (r) => r.throughput), digits: 0 },
      { ...figure(`latency p50, ${warm}`, "ms", "warm", (r) => r.p50Ms), digits: 2 },
      { ...figure(`latency p99, ${warm}`, "ms", "warm", (r) => r.p99Ms), digits: 2 },
      ...(["fresh", "warm"] as const).flatMap((phase) => {
        const when = phase === "fresh" ? "" : `, ${warm}`;
        return CPU_FIGURES.map(([name, unit, f, digits]) => ({
          ...figure(`${name}${when}`, unit, phase, f),
          digits,
        }));
      }),
    ],
    notes: [
      `${CONCURRENCY} requests in flight over keep-alive connections (a closed-loop generator in the bench process, node:http), ${n.measured} requests per repetition after ${n["warm-up"]} warm-up requests; every request a new session, a command agent and a testCommand. The goals are judged on these figures, as before.`,
      `The \`warm\` figures: the same process, after ${n.warming.toLocaleString("en")} more requests, measured again (${n.measured} requests), the baseline likewise — a running service's figures: V8 optimises a fresh process's code over its first few thousand requests (looprun's API spent ~1.4 ms of CPU per submit in its first 500 and ~0.4 ms after 3,000; the bare handler's path is short and warms sooner).`,
      "The server's CPU (`/proc/<pid>/task`, during each measurement): its main thread runs the JavaScript; its other threads are V8's (the optimising compiler working in the background, the garbage collector's helpers) and libuv's pool. The machine's busy share counts every process: the API, Redis, the bench's own load generator, and anything else on the machine.",
      "No worker runs: the API alone is measured; jobs wait in Redis. A fresh API process and database for every repetition, the baseline server likewise, alternating.",
      "looprun's API ran with RATE_LIMIT_PER_MINUTE=0: a per-client limit would answer 429 to a load test from one address (on loopback none is set by default, beyond it 1200/min).",
      engine === "sqlite"
        ? "The baseline (bench/baselines/submit-server.ts) parses the JSON body (`c.req.json()`, Hono's way), inserts one row and adds one job with the run id; looprun reads the body from Node's request (apps/api/src/request-body.ts), validates it (zod), resolves and checks the workspace path (the worker creates the directory), writes the session, the run and its run_queued event in one BEGIN IMMEDIATE transaction."
        : "The baseline (bench/baselines/submit-server.ts with DATABASE_URL) parses the JSON body (`c.req.json()`, Hono's way), inserts one row through a pool of 10 and adds one job with the run id; looprun reads the body from Node's request (apps/api/src/request-body.ts), validates it (zod), resolves and checks the workspace path (the worker creates the directory), writes the session, the run and its run_queued event (one statement; see packages/db/src/pg/submit.ts).",
      ...(engine === "postgres" ? [POSTGRES_NOTE] : []),
    ],
  };
}
