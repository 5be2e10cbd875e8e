import { join } from "node:path";
import type { BenchContext } from "./support/context";
import { type HistoryData, loadHistory, loadHistoryPostgres } from "./support/history-data";
import { sequentialLatencies } from "./support/load";
import { api, startStack } from "./support/looprun";
import { benchPostgresDatabase, POSTGRES_NOTE } from "./support/postgres";
import { tempDir } from "./support/processes";
import type { Figure, ScenarioResult } from "./support/report";
import { percentile, summarize } from "./support/stats";

const GOAL_MS = 20;
/** Time per endpoint and repetition: a slow endpoint gets fewer samples, not a longer bench. */
const ENDPOINT_MAX_MS = 8000;
const QUICK_ENDPOINT_MAX_MS = 2000;
const MIN_SAMPLES = 5;

/** An endpoint measured with varying arguments: the i-th request's path. */
interface Endpoint {
  name: string;
  path: (i: number) => string;
}

function endpoints(data: HistoryData, hasStats: boolean): Endpoint[] {
  const { runIds, longRunIds, sessionIds } = data;
  // Deterministic "random" picks, so every repetition asks the same.
  const pick = <T>(list: readonly T[], i: number, from = 0, to = list.length): T => {
    const span = Math.max(1, to - from);
    return list[from + ((i * 7919) % span)] as T;
  };
  const deep = (i: number) => pick(runIds, i, 0, Math.ceil(runIds.length / 10));
  const weekAgo = new Date(data.newestAt - 7 * 24 * 3_600_000).toISOString();
  const list: Endpoint[] = [
    { name: "GET /api/runs (first page, 20)", path: () => "/api/runs" },
    { name: "GET /api/runs?limit=100 (first page)", path: () => "/api/runs?limit=100" },
    {
      name: "GET /api/runs?cursor= (deep: oldest 10%)",
      path: (i) => `/api/runs?cursor=${deep(i)}`,
    },
    { name: "GET /api/runs?status=failed", path: () => "/api/runs?status=failed" },
    {
      name: "GET /api/runs?status=failed&cursor= (deep)",
      path: (i) => `/api/runs?status=failed&cursor=${deep(i)}`,
    },
    { name: "GET /api/runs?status=running (rare)", path: () => "/api/runs?status=running" },
    { name: "GET /api/runs?sessionId=", path: (i) => `/api/runs?sessionId=${pick(sessionIds, i)}` },
    {
      name: "GET /api/runs?sessionId=&status=succeeded",
      path: (i) => `/api/runs?sessionId=${pick(sessionIds, i)}&status=succeeded`,
    },
    { name: "GET /api/runs/:id", path: (i) => `/api/runs/${pick(runIds, i)}` },
    {
      name: "GET /api/runs/:id/events?after=0 (typical run)",
      path: (i) => `/api/runs/${pick(runIds, i)}/events?after=0`,
    },
    {
      name: "GET /api/runs/:id/events?after=N (long run, 1000-event page)",
      path: (i) => `/api/runs/${pick(longRunIds, i)}/events?after=${(i % 4) * 1000}`,
    },
    {
      name: "GET /api/runs/:id/events?after=N (long run, last events)",
      path: (i) =>
        `/api/runs/${pick(longRunIds, i)}/events?after=${data.counts.events > 0 ? 4990 : 0}`,
    },
    { name: "GET /api/sessions/:id", path: (i) => `/api/sessions/${pick(sessionIds, i)}` },
    { name: "GET /api/stats/tools (all time)", path: () => "/api/stats/tools" },
    {
      name: "GET /api/stats/tools?since= (last 7 days)",
      path: () => `/api/stats/tools?since=${weekAgo}`,
    },
  ];
  if (hasStats) {
    list.push({ name: "GET /api/stats (all time)", path: () => "/api/stats" });
    list.push({
      name: "GET /api/stats?since= (last 7 days)",
      path: () => `/api/stats?since=${weekAgo}`,
    });
  }
  return list;
}

/** 5. Reads of a large history: p99 per request of the list, events and stats endpoints. */
export function historyAtScale(ctx: BenchContext): Promise<ScenarioResult> {
  return historyOn(ctx, "sqlite");
}

/** 5b. The same reads with the same history in PostgreSQL (issue 10: beside SQLite). */
export function historyAtScalePostgres(ctx: BenchContext): Promise<ScenarioResult> {
  return historyOn(ctx, "postgres");
}

async function historyOn(
  ctx: BenchContext,
  engine: "sqlite" | "postgres",
): Promise<ScenarioResult> {
  const shape = ctx.quick
    ? {
        runs: 10_000,
        events: 200_000,
        longRuns: 5,
        longRunEvents: 5000,
        toolCallsPerRun: 2,
        runsPerSession: 10,
      }
    : {
        runs: 100_000,
        events: 2_000_000,
        longRuns: 20,
        longRunEvents: 5000,
        toolCallsPerRun: 2,
        runsPerSession: 10,
      };
  const requests = ctx.quick ? 60 : 200;
  // Each repetition reads every endpoint for up to ENDPOINT_MAX_MS: three are plenty.
  const reps = ctx.quick ? 1 : Math.min(ctx.reps, 3);
  const maxMs = ctx.quick ? QUICK_ENDPOINT_MAX_MS : ENDPOINT_MAX_MS;
  const dir = tempDir("looprun-bench-history-");
  const databasePath = join(dir, "history.db");
  ctx.log(`  loading ${shape.runs} runs and ~${shape.events} events into ${engine}…`);
  const pgDatabase = engine === "postgres" ? await benchPostgresDatabase("history") : null;
  const data = pgDatabase
    ? await loadHistoryPostgres(pgDatabase.url, shape)
    : loadHistory(databasePath, shape);
  ctx.log(`  loaded in ${(data.loadMs / 1000).toFixed(1)} s: ${JSON.stringify(data.counts)}`);
  const stack = await startStack({
    redisUrl: ctx.redis.url,
    databasePath,
    ...(pgDatabase ? { env: { DATABASE_URL: pgDatabase.url } } : {}),
  });
  const p99: Record<string, number[]> = {};
  const p50: Record<string, number[]> = {};
  const samples: Record<string, number> = {};
  let hasStats = false;
  try {
    const probe = await api(stack.url, "GET", "/api/stats");
    hasStats = probe.status === 200;
    const list = endpoints(data, hasStats);
    for (const e of list) {
      const res = await api(stack.url, "GET", e.path(0));
      if (res.status !== 200)
        throw new Error(
          `${e.name}: ${e.path(0)} answered ${res.status}: ${JSON.stringify(res.body)}`,
        );
      await sequentialLatencies(
        stack.url,
        Array.from({ length: 20 }, (_, i) => e.path(i)),
        { maxMs: Math.min(5000, maxMs), minCount: 2 },
      );
    }
    for (let rep = 0; rep < reps; rep++) {
      for (const e of list) {
        const latencies = await sequentialLatencies(
          stack.url,
          Array.from({ length: requests }, (_, i) => e.path(i)),
          { maxMs, minCount: MIN_SAMPLES },
        );
        samples[e.name] = Math.min(samples[e.name] ?? latencies.length, latencies.length);
        p99[e.name] = [...(p99[e.name] ?? []), percentile(latencies, 99)];
        p50[e.name] = [...(p50[e.name] ?? []), percentile(latencies, 50)];
      }
      const worst = Object.entries(p99).sort((a, b) => (b[1].at(-1) ?? 0) - (a[1].at(-1) ?? 0))[0];
      ctx.log(`  rep ${rep + 1}: worst p99 ${worst?.[1].at(-1)?.toFixed(1)} ms (${worst?.[0]})`);
    }
  } finally {
    await stack.stop();
    await pgDatabase?.drop();
  }
  const figures: Figure[] = Object.keys(p99).map((name) => {
    const s = summarize(p99[name] ?? []);
    return {
      name: `${name} p99`,
      unit: "ms",
      digits: 1,
      looprun: s,
      baseline: { name: "(p50)", summary: summarize(p50[name] ?? []) },
      goal: `≤ ${GOAL_MS} ms`,
      met: s.median <= GOAL_MS,
    };
  });
  const c = data.counts;
  const few = Object.entries(samples).filter(([, n]) => n < requests);
  const loaded =
    engine === "postgres"
      ? "bulk-loaded into a PostgreSQL database migrated by `openPgDatabase` — the statistics triggers running as for any insert — then `VACUUM ANALYZE`d, as autovacuum would"
      : "bulk-loaded into a file created by `openDatabase` with the real migrations";
  return {
    id: engine === "postgres" ? "history-postgres" : "history",
    title: engine === "postgres" ? "5b. History at scale, PostgreSQL" : "5. History at scale",
    figures,
    notes: [
      `${ctx.quick ? "**--quick: a smaller history.** " : ""}The database held ${c.runs.toLocaleString("en")} runs, ${c.events.toLocaleString("en")} events, ${c.iterations.toLocaleString("en")} iterations, ${c.toolCalls.toLocaleString("en")} tool calls and ${c.sessions.toLocaleString("en")} sessions (${loaded}, in ${(data.loadMs / 1000).toFixed(1)} s); ${shape.longRuns} runs have ${shape.longRunEvents} events each, the others about ${Math.round((c.events - shape.longRuns * shape.longRunEvents) / (c.runs - shape.longRuns))}.`,
      ...(engine === "postgres" ? [POSTGRES_NOTE] : []),
      `${reps} repetitions; ${requests} requests per endpoint and repetition, one at a time over a keep-alive connection, with varying ids and cursors; 20 warm-up requests per endpoint first. The \`(p50)\` column is the median request of the same samples, for scale.`,
      ...(few.length > 0
        ? [
            `Slow endpoints got fewer samples (at most ${maxMs / 1000} s each per repetition, at least ${MIN_SAMPLES}): ${few.map(([name, n]) => `${name}: ${n}`).join("; ")}. With few samples the p99 is the slowest request.`,
          ]
        : []),
      engine === "postgres"
        ? "PostgreSQL has its statistics (VACUUM ANALYZE above); SQLite's run had none: no ANALYZE was run there (a deployment's SQLite file would not have statistics either)."
        : "No ANALYZE was run (a deployment's database would not have statistics either).",
      hasStats
        ? "`GET /api/stats` exists at this commit and was measured."
        : "`GET /api/stats` did not exist at this commit (404): not measured.",
    ],
  };
}
