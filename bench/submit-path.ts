import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { BenchContext } from "./support/context";
import { type LoadOptions, type LoadResult, runLoad } from "./support/load";
import { startStack } from "./support/looprun";
import { benchPostgresDatabase, POSTGRES_NOTE } from "./support/postgres";
import { freePort, removeTempDir, spawnTs, tempDir } from "./support/processes";
import type { ScenarioResult } from "./support/report";
import { pairedRatios, summarize } from "./support/stats";

const CONCURRENCY = 20;

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

function loadOptions(ctx: BenchContext, baseUrl: string, warmup: boolean): LoadOptions {
  const tag = randomBytes(4).toString("hex");
  return {
    baseUrl,
    method: "POST",
    path: "/api/runs",
    concurrency: CONCURRENCY,
    requests: warmup ? 200 : ctx.quick ? 600 : 2000,
    maxMs: warmup ? 10_000 : ctx.quick ? 10_000 : 30_000,
    body: submitBody(`${warmup ? "w" : "m"}-${tag}`),
  };
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

export async function measureLooprun(ctx: BenchContext, engine: Engine): Promise<LoadResult> {
  // No workers: the API alone is measured (the jobs wait in Redis).
  const dir = tempDir("looprun-bench-submit-");
  const database = await freshDatabase(engine, dir, "submit");
  const stack = await startStack({ redisUrl: ctx.redis.url, env: database.env });
  try {
    checkErrors("looprun warm-up", await runLoad(loadOptions(ctx, stack.url, true)));
    const result = await runLoad(loadOptions(ctx, stack.url, false));
    checkErrors("looprun", result);
    return result;
  } finally {
    await stack.stop();
    await database.drop();
    removeTempDir(dir);
  }
}

export async function measureBaseline(ctx: BenchContext, engine: Engine): Promise<LoadResult> {
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
    const url = `http://127.0.0.1:${port}`;
    checkErrors("baseline warm-up", await runLoad(loadOptions(ctx, url, true)));
    const result = await runLoad(loadOptions(ctx, url, false));
    checkErrors("baseline", result);
    return result;
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
  const ours: LoadResult[] = [];
  const base: LoadResult[] = [];
  for (let rep = 0; rep < ctx.reps; rep++) {
    ours.push(await measureLooprun(ctx, engine));
    base.push(await measureBaseline(ctx, engine));
    const o = ours.at(-1);
    const b = base.at(-1);
    ctx.log(
      `  rep ${rep + 1}: looprun ${o?.throughput.toFixed(0)} req/s p50 ${o?.p50Ms.toFixed(1)} p99 ${o?.p99Ms.toFixed(1)} ms; baseline ${b?.throughput.toFixed(0)} req/s p50 ${b?.p50Ms.toFixed(1)} p99 ${b?.p99Ms.toFixed(1)} ms`,
    );
  }
  const pick = (list: LoadResult[], f: (r: LoadResult) => number) => list.map(f);
  const figure = (name: string, unit: string, f: (r: LoadResult) => number) => ({
    name,
    unit,
    looprun: summarize(pick(ours, f)),
    baseline: { name: `bare Hono+${dbName}+Queue.add`, summary: summarize(pick(base, f)) },
    ratio: summarize(pairedRatios(pick(ours, f), pick(base, f))),
  });
  const throughput = figure("throughput", "req/s", (r) => r.throughput);
  const p50 = figure("latency p50", "ms", (r) => r.p50Ms);
  const p99 = figure("latency p99", "ms", (r) => r.p99Ms);
  return {
    id: engine === "sqlite" ? "submit-path" : "submit-path-postgres",
    title: engine === "sqlite" ? "2. Submit path" : "2b. Submit path, PostgreSQL",
    figures: [
      { ...throughput, digits: 0, goal: "≥ 0.70× baseline", met: throughput.ratio.median >= 0.7 },
      { ...p50, digits: 2 },
      { ...p99, digits: 2, goal: "≤ 25 ms", met: p99.looprun.median <= 25 },
    ],
    notes: [
      `${CONCURRENCY} requests in flight over keep-alive connections (a closed-loop generator in the bench process, node:http), ${ctx.quick ? 600 : 2000} requests per repetition after 200 warm-up requests; every request a new session, a command agent and a testCommand.`,
      "No worker runs: the API alone is measured; jobs wait in Redis. A fresh API process and database for every repetition, the baseline server likewise, alternating.",
      "looprun's API ran with RATE_LIMIT_PER_MINUTE=0: a per-client limit would answer 429 to a load test from one address (on loopback none is set by default, beyond it 1200/min).",
      engine === "sqlite"
        ? "The baseline (bench/baselines/submit-server.ts) parses the JSON body (`c.req.json()`, Hono's way), inserts one row and adds one job with the run id; looprun reads the body from Node's request (apps/api/src/request-body.ts), validates it (zod), resolves and checks the workspace path (the worker creates the directory), writes the session, the run and its run_queued event in one BEGIN IMMEDIATE transaction."
        : "The baseline (bench/baselines/submit-server.ts with DATABASE_URL) parses the JSON body (`c.req.json()`, Hono's way), inserts one row through a pool of 10 and adds one job with the run id; looprun reads the body from Node's request (apps/api/src/request-body.ts), validates it (zod), resolves and checks the workspace path (the worker creates the directory), writes the session, the run and its run_queued event (one statement; see packages/db/src/pg/submit.ts).",
      ...(engine === "postgres" ? [POSTGRES_NOTE] : []),
    ],
  };
}
