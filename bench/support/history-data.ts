import { EMPTY_METRICS, normalizeSubmission, RunSubmission } from "@looprun/core";
import { openDatabase } from "@looprun/db";
import { openPgDatabase } from "@looprun/db/pg";
import { ulid } from "ulid";

export interface HistoryShape {
  runs: number;
  events: number;
  /** Runs with `longRunEvents` events each (the rest share what is left). */
  longRuns: number;
  longRunEvents: number;
  toolCallsPerRun: number;
  runsPerSession: number;
}

export interface HistoryData {
  /** Run ids, oldest first. */
  runIds: string[];
  /** Ids of the runs with many events. */
  longRunIds: string[];
  sessionIds: string[];
  counts: { runs: number; events: number; iterations: number; toolCalls: number; sessions: number };
  /** The newest run's `createdAt`. */
  newestAt: number;
  loadMs: number;
}

const MINUTE = 60_000;
const STATUSES = [
  "succeeded",
  "succeeded",
  "succeeded",
  "succeeded",
  "succeeded",
  "succeeded",
  "succeeded",
  "failed",
  "failed",
  "stopped",
];
const FAIL_REASONS = ["max_iterations", "consecutive_failures", "error", "max_minutes"];
const MIDDLE_EVENTS = [
  "iteration_started",
  "agent_started",
  "agent_finished",
  "validation_failed",
  "cooldown_started",
];

/** One batch of rows, column values in the order of the loaders' statements (JSON as text). */
export interface HistoryBatch {
  sessions: [id: string, workspace: string, createdAt: number][];
  runs: (string | number | null)[][];
  iterations: (string | number | null)[][];
  events: [runId: string, seq: number, type: string, at: number, data: string][];
  toolCalls: (string | number)[][];
}

/** The ids and counts of a history, filled in as its batches are made. */
type HistoryPlan = Omit<HistoryData, "loadMs"> & {
  /** Runs in the history; batches cover [from, to) of them. */
  total: number;
  batch(from: number, to: number): HistoryBatch;
};

/**
 * A history: sessions, finished runs (the newest ones still queued or running), their
 * iterations, events and tool calls, one run a minute up to now. The same rows whichever
 * database they go to.
 */
function planHistory(shape: HistoryShape): HistoryPlan {
  const spec = JSON.stringify(
    normalizeSubmission(
      RunSubmission.parse({
        task: "bench history task",
        agent: { type: "command", command: "./agent.sh" },
        testCommand: "npm test",
        maxIterations: 6,
      }),
    ),
  );
  const sessions = Math.max(1, Math.ceil(shape.runs / shape.runsPerSession));
  const now = Date.now();
  const firstAt = now - shape.runs * MINUTE;
  const sessionIds = Array.from({ length: sessions }, (_, i) => `hist-${i}`);
  const runIds: string[] = [];
  const longRunIds: string[] = [];
  const longEvery = Math.max(1, Math.floor(shape.runs / Math.max(1, shape.longRuns)));
  const shortEvents = Math.max(
    3,
    Math.floor(
      (shape.events - shape.longRuns * shape.longRunEvents) / (shape.runs - shape.longRuns),
    ),
  );
  const counts = { runs: 0, events: 0, iterations: 0, toolCalls: 0, sessions };
  // The newest runs are still active: one per session at most (the partial unique index).
  const active = Math.min(50, sessions, shape.runs);

  const batch = (from: number, to: number): HistoryBatch => {
    const out: HistoryBatch = { sessions: [], runs: [], iterations: [], events: [], toolCalls: [] };
    for (let i = from; i < to; i++) {
      const createdAt = firstAt + i * MINUTE;
      if (i < sessions)
        out.sessions.push([sessionIds[i] as string, `/srv/workspaces/hist-${i}`, createdAt]);
      const id = ulid(createdAt);
      runIds.push(id);
      const isLong = longRunIds.length < shape.longRuns && i % longEvery === longEvery - 1;
      if (isLong) longRunIds.push(id);
      const activeRun = i >= shape.runs - active;
      const status = activeRun
        ? i % 2 === 0
          ? "queued"
          : "running"
        : (STATUSES[(i + Math.floor(i / sessions)) % STATUSES.length] ?? "succeeded");
      const iterationsDone = status === "queued" ? 0 : 1 + (i % 5);
      const reason =
        status === "succeeded"
          ? "success"
          : status === "failed"
            ? (FAIL_REASONS[i % 4] ?? "error")
            : status === "stopped"
              ? "stopped"
              : null;
      const startedAt = status === "queued" ? null : createdAt + 50;
      const finishedAt = activeRun ? null : createdAt + 30_000;
      const metrics = JSON.stringify({
        ...EMPTY_METRICS,
        iterations: iterationsDone,
        validationFailures: Math.max(0, iterationsDone - 1),
        toolCalls: shape.toolCallsPerRun,
      });
      out.runs.push([
        id,
        sessionIds[i % sessions] as string,
        `bench history task #${i}`,
        spec,
        `/srv/workspaces/hist-${i % sessions}`,
        status,
        reason,
        activeRun ? null : `${status} after ${iterationsDone} iterations`,
        iterationsDone,
        activeRun ? status : `${status} after ${iterationsDone} iterations`,
        metrics,
        createdAt,
        startedAt,
        finishedAt,
        startedAt === null ? null : startedAt + 45 * MINUTE,
      ]);
      counts.runs++;
      for (let n = 1; n <= iterationsDone; n++) {
        const passed = n === iterationsDone && status === "succeeded";
        const at = createdAt + n * 5000;
        out.iterations.push([
          id,
          n,
          passed ? "passed" : "failed",
          passed ? "complete" : "validation_failed",
          `iteration ${n} prompt`,
          JSON.stringify({ exitCode: 0, output: "done\n", durationMs: 3000 }),
          JSON.stringify([
            {
              command: "npm test",
              exitCode: passed ? 0 : 1,
              durationMs: 1500,
              output: passed ? "ok\n" : "1 failing\n",
            },
          ]),
          passed ? null : "$ npm test\n(exit code 1)\n1 failing",
          at,
          at + 4500,
        ]);
        counts.iterations++;
      }
      const events = isLong ? shape.longRunEvents : shortEvents;
      for (let seq = 1; seq <= events; seq++) {
        const type =
          seq === 1
            ? "run_queued"
            : seq === 2
              ? "run_started"
              : seq === events && !activeRun
                ? "run_finished"
                : (MIDDLE_EVENTS[seq % MIDDLE_EVENTS.length] as string);
        const data = {
          iteration: Math.ceil(seq / 5),
          budget: {
            elapsedMs: seq * 100,
            remainingIterations: 6 - Math.min(6, Math.ceil(seq / 5)),
          },
        };
        out.events.push([id, seq, type, createdAt + seq * 100, JSON.stringify(data)]);
      }
      counts.events += events;
      for (let seq = 1; seq <= shape.toolCallsPerRun; seq++) {
        const isError = (i + seq) % 7 === 0 ? 1 : 0;
        out.toolCalls.push([
          id,
          seq,
          seq % 2 === 0 ? "write_file" : "read_text_file",
          JSON.stringify({ path: `src/file-${seq}.ts` }),
          isError,
          isError ? "ENOENT: no such file or directory" : "ok",
          10 + (i % 50),
          createdAt + seq * 1000,
        ]);
      }
      counts.toolCalls += shape.toolCallsPerRun;
    }
    return out;
  };
  return {
    runIds,
    longRunIds,
    sessionIds,
    counts,
    newestAt: firstAt + (shape.runs - 1) * MINUTE,
    total: shape.runs,
    batch,
  };
}

const BATCH_RUNS = 5000;

/**
 * Fills a new SQLite database (created with the real migrations by `openDatabase`) with a
 * history. Loads with prepared statements in big transactions; this loading connection alone
 * runs with synchronous=OFF (it is a temp file that is checkpointed and closed before the API
 * opens it with its own settings).
 */
export function loadHistory(path: string, shape: HistoryShape): HistoryData {
  const started = performance.now();
  const database = openDatabase(path);
  const sqlite = database.sqlite;
  sqlite.pragma("synchronous = OFF");
  const insert = {
    session: sqlite.prepare("insert into sessions (id, workspace, created_at) values (?, ?, ?)"),
    run: sqlite.prepare(
      `insert into runs (id, session_id, task, spec, workspace, status, reason, summary, iteration, progress,
         metrics, created_at, started_at, finished_at, deadline_at, consecutive_failures, epoch)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 1)`,
    ),
    iteration: sqlite.prepare(
      `insert into iterations (run_id, n, status, outcome, prompt, agent, validation, feedback, started_at, finished_at, attempt)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`,
    ),
    event: sqlite.prepare(
      "insert into events (run_id, seq, type, at, data) values (?, ?, ?, ?, ?)",
    ),
    toolCall: sqlite.prepare(
      `insert into tool_calls (run_id, seq, tool, args, is_error, result, duration_ms, created_at, iteration, server)
       values (?, ?, ?, ?, ?, ?, ?, ?, 1, 'workspace')`,
    ),
  };
  const plan = planHistory(shape);
  const load = sqlite.transaction((b: HistoryBatch) => {
    for (const row of b.sessions) insert.session.run(...row);
    for (const row of b.runs) insert.run.run(...row);
    for (const row of b.iterations) insert.iteration.run(...row);
    for (const row of b.events) insert.event.run(...row);
    for (const row of b.toolCalls) insert.toolCall.run(...row);
  });
  for (let from = 0; from < plan.total; from += BATCH_RUNS)
    load(plan.batch(from, Math.min(plan.total, from + BATCH_RUNS)));
  sqlite.pragma("wal_checkpoint(TRUNCATE)");
  database.close();
  const { total: _total, batch: _batch, ...data } = plan;
  return { ...data, loadMs: performance.now() - started };
}

/** Columns of `rows` (a batch's rows of one table) as arrays, for an `unnest` insert. */
function columns<T extends unknown[]>(rows: T[], width: number): unknown[][] {
  const cols: unknown[][] = Array.from({ length: width }, () => []);
  for (const row of rows) for (let c = 0; c < width; c++) cols[c]?.push(row[c] ?? null);
  return cols;
}

/**
 * The same history into a new PostgreSQL database: migrated by `openPgDatabase` as the API
 * would, then loaded with one `insert … select from unnest(…)` per table and chunk (the
 * statistics triggers run as for any insert).
 */
export async function loadHistoryPostgres(url: string, shape: HistoryShape): Promise<HistoryData> {
  const started = performance.now();
  const database = await openPgDatabase(url);
  const pool = database.pool;
  const plan = planHistory(shape);
  const CHUNK = 20_000;
  const insert = async (sql: string, rows: unknown[][], width: number) => {
    for (let at = 0; at < rows.length; at += CHUNK)
      await pool.query(sql, columns(rows.slice(at, at + CHUNK), width));
  };
  try {
    for (let from = 0; from < plan.total; from += BATCH_RUNS) {
      const b = plan.batch(from, Math.min(plan.total, from + BATCH_RUNS));
      await insert(
        `insert into sessions (id, workspace, created_at)
         select * from unnest($1::text[], $2::text[], $3::int8[])`,
        b.sessions,
        3,
      );
      await insert(
        `insert into runs (id, session_id, task, spec, workspace, status, reason, summary, iteration, progress,
           metrics, created_at, started_at, finished_at, deadline_at, consecutive_failures, epoch)
         select *, 0, 1 from unnest($1::text[], $2::text[], $3::text[], $4::json[], $5::text[], $6::text[],
           $7::text[], $8::text[], $9::int4[], $10::text[], $11::json[], $12::int8[], $13::int8[],
           $14::int8[], $15::int8[])`,
        b.runs,
        15,
      );
      await insert(
        `insert into iterations (run_id, n, status, outcome, prompt, agent, validation, feedback, started_at, finished_at, attempt)
         select *, 1 from unnest($1::text[], $2::int4[], $3::text[], $4::text[], $5::text[], $6::json[],
           $7::json[], $8::text[], $9::int8[], $10::int8[])`,
        b.iterations,
        10,
      );
      await insert(
        `insert into events (run_id, seq, type, at, data)
         select * from unnest($1::text[], $2::int4[], $3::text[], $4::int8[], $5::json[])`,
        b.events,
        5,
      );
      await insert(
        `insert into tool_calls (run_id, seq, tool, args, is_error, result, duration_ms, created_at, iteration, server)
         select run_id, seq, tool, args, is_error::int4 = 1, result, duration_ms, created_at, 1, 'workspace'
         from unnest($1::text[], $2::int4[], $3::text[], $4::json[], $5::int4[], $6::text[], $7::int8[],
           $8::int8[]) as t(run_id, seq, tool, args, is_error, result, duration_ms, created_at)`,
        b.toolCalls,
        8,
      );
    }
    await pool.query("vacuum analyze");
    // The load's dirty pages written now, as SQLite's file is checkpointed above, rather than
    // by a checkpoint that falls inside the measured requests.
    await pool.query("checkpoint");
  } finally {
    await database.close();
  }
  const { total: _total, batch: _batch, ...data } = plan;
  return { ...data, loadMs: performance.now() - started };
}
