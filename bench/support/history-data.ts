import { EMPTY_METRICS, normalizeSubmission, RunSubmission } from "@looprun/core";
import { openDatabase } from "@looprun/db";
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

/**
 * Fills a new database (created with the real migrations by `openDatabase`) with a history:
 * sessions, finished runs (the newest ones still queued or running), their iterations, events
 * and tool calls, one run a minute up to now. Loads with prepared statements in big
 * transactions; this loading connection alone runs with synchronous=OFF (it is a temp file
 * that is checkpointed and closed before the API opens it with its own settings).
 */
export function loadHistory(path: string, shape: HistoryShape): HistoryData {
  const started = performance.now();
  const database = openDatabase(path);
  const sqlite = database.sqlite;
  sqlite.pragma("synchronous = OFF");
  const spec = normalizeSubmission(
    RunSubmission.parse({
      task: "bench history task",
      agent: { type: "command", command: "./agent.sh" },
      testCommand: "npm test",
      maxIterations: 6,
    }),
  );
  const insertSession = sqlite.prepare(
    "insert into sessions (id, workspace, created_at) values (?, ?, ?)",
  );
  const insertRun = sqlite.prepare(
    `insert into runs (id, session_id, task, spec, workspace, status, reason, summary, iteration, progress,
       metrics, consecutive_failures, epoch, created_at, started_at, finished_at, deadline_at)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 1, ?, ?, ?, ?)`,
  );
  const insertIteration = sqlite.prepare(
    `insert into iterations (run_id, n, attempt, status, outcome, prompt, agent, validation, feedback, started_at, finished_at)
     values (?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const insertEvent = sqlite.prepare(
    "insert into events (run_id, seq, type, at, data) values (?, ?, ?, ?, ?)",
  );
  const insertToolCall = sqlite.prepare(
    `insert into tool_calls (run_id, seq, iteration, server, tool, args, is_error, result, duration_ms, created_at)
     values (?, ?, 1, 'workspace', ?, ?, ?, ?, ?, ?)`,
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

  const loadBatch = sqlite.transaction((from: number, to: number) => {
    for (let i = from; i < to; i++) {
      const createdAt = firstAt + i * MINUTE;
      if (i < sessions) insertSession.run(sessionIds[i], `/srv/workspaces/hist-${i}`, createdAt);
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
            ? FAIL_REASONS[i % 4]
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
      insertRun.run(
        id,
        sessionIds[i % sessions],
        `bench history task #${i}`,
        JSON.stringify(spec),
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
      );
      counts.runs++;
      for (let n = 1; n <= iterationsDone; n++) {
        const passed = n === iterationsDone && status === "succeeded";
        const at = createdAt + n * 5000;
        insertIteration.run(
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
        );
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
                : MIDDLE_EVENTS[seq % MIDDLE_EVENTS.length];
        const data = {
          iteration: Math.ceil(seq / 5),
          budget: {
            elapsedMs: seq * 100,
            remainingIterations: 6 - Math.min(6, Math.ceil(seq / 5)),
          },
        };
        insertEvent.run(id, seq, type, createdAt + seq * 100, JSON.stringify(data));
      }
      counts.events += events;
      for (let seq = 1; seq <= shape.toolCallsPerRun; seq++) {
        const isError = (i + seq) % 7 === 0 ? 1 : 0;
        insertToolCall.run(
          id,
          seq,
          seq % 2 === 0 ? "write_file" : "read_text_file",
          JSON.stringify({ path: `src/file-${seq}.ts` }),
          isError,
          isError ? "ENOENT: no such file or directory" : "ok",
          10 + (i % 50),
          createdAt + seq * 1000,
        );
      }
      counts.toolCalls += shape.toolCallsPerRun;
    }
  });
  for (let from = 0; from < shape.runs; from += 5000)
    loadBatch(from, Math.min(shape.runs, from + 5000));
  sqlite.pragma("wal_checkpoint(TRUNCATE)");
  database.close();
  return {
    runIds,
    longRunIds,
    sessionIds,
    counts,
    newestAt: firstAt + (shape.runs - 1) * MINUTE,
    loadMs: performance.now() - started,
  };
}
