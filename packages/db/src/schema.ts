import type {
  AgentResult,
  ApprovalRequest,
  PartialSuccess,
  Plan,
  RunMetrics,
  RunSpec,
  ValidationResult,
} from "@looprun/core";
import { sql } from "drizzle-orm";
import {
  index,
  integer,
  primaryKey,
  real,
  sqliteTable,
  text,
  uniqueIndex,
} from "drizzle-orm/sqlite-core";

export const sessions = sqliteTable("sessions", {
  id: text("id").primaryKey(),
  workspace: text("workspace").notNull(),
  createdAt: integer("created_at").notNull(),
});

export const runs = sqliteTable(
  "runs",
  {
    id: text("id").primaryKey(),
    sessionId: text("session_id")
      .notNull()
      .references(() => sessions.id),
    task: text("task").notNull(),
    spec: text("spec", { mode: "json" }).$type<RunSpec>().notNull(),
    workspace: text("workspace").notNull(),
    status: text("status").notNull(),
    reason: text("reason"),
    summary: text("summary"),
    iteration: integer("iteration").notNull().default(0),
    progress: text("progress"),
    metrics: text("metrics", { mode: "json" }).$type<RunMetrics>().notNull(),
    consecutiveFailures: integer("consecutive_failures").notNull().default(0),
    stalledIterations: integer("stalled_iterations").notNull().default(0),
    partial: text("partial", { mode: "json" }).$type<PartialSuccess>(),
    epoch: integer("epoch").notNull().default(0),
    latestReviewId: text("latest_review_id"),
    baselineSnapshot: text("baseline_snapshot"),
    latestSnapshot: text("latest_snapshot"),
    plan: text("plan", { mode: "json" }).$type<Plan>(),
    activePgid: integer("active_pgid"),
    /** Set while the run is `awaiting_approval`: what a person must approve or answer. */
    approval: text("approval", { mode: "json" }).$type<ApprovalRequest>(),
    /** Time spent awaiting approval: the budget clock does not count it. */
    pausedMs: integer("paused_ms").notNull().default(0),
    createdAt: integer("created_at").notNull(),
    startedAt: integer("started_at"),
    finishedAt: integer("finished_at"),
    deadlineAt: integer("deadline_at"),
    stopRequestedAt: integer("stop_requested_at"),
  },
  (t) => [
    // The source of truth for "one active run per session".
    uniqueIndex("runs_one_active_per_session")
      .on(t.sessionId)
      .where(sql`status in ('queued', 'running', 'awaiting_approval', 'stopping')`),
    index("runs_session_id_idx").on(t.sessionId, t.id),
    index("runs_status_id_idx").on(t.status, t.id),
    // The edges of a stats window that do not cover a whole hour (see stats-hourly.ts).
    index("runs_created_at_idx").on(t.createdAt),
  ],
);

export const iterations = sqliteTable(
  "iterations",
  {
    runId: text("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    n: integer("n").notNull(),
    attempt: integer("attempt").notNull(),
    status: text("status").notNull(),
    outcome: text("outcome"),
    prompt: text("prompt").notNull(),
    agent: text("agent", { mode: "json" }).$type<AgentResult>(),
    validation: text("validation", { mode: "json" }).$type<ValidationResult[]>().notNull(),
    reviewId: text("review_id"),
    feedback: text("feedback"),
    startedAt: integer("started_at").notNull(),
    finishedAt: integer("finished_at"),
  },
  (t) => [primaryKey({ columns: [t.runId, t.n, t.attempt] })],
);

export const events = sqliteTable(
  "events",
  {
    runId: text("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    seq: integer("seq").notNull(),
    type: text("type").notNull(),
    at: integer("at").notNull(),
    data: text("data", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.seq] })],
);

export const toolCalls = sqliteTable(
  "tool_calls",
  {
    runId: text("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    seq: integer("seq").notNull(),
    iteration: integer("iteration").notNull(),
    server: text("server").notNull(),
    tool: text("tool").notNull(),
    args: text("args", { mode: "json" }).$type<unknown>().notNull(),
    isError: integer("is_error", { mode: "boolean" }).notNull(),
    result: text("result").notNull(),
    durationMs: integer("duration_ms").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.runId, t.seq] }),
    index("tool_calls_failures_idx").on(t.runId, t.isError),
    index("tool_calls_created_at_idx").on(t.createdAt),
  ],
);

export const reviewArtifacts = sqliteTable(
  "review_artifacts",
  {
    id: text("id").primaryKey(),
    runId: text("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    sessionId: text("session_id").notNull(),
    phase: text("phase").notNull().default("review"),
    iteration: integer("iteration").notNull(),
    blockingIssues: text("blocking_issues", { mode: "json" }).$type<string[]>().notNull(),
    nonBlockingIssues: text("non_blocking_issues", { mode: "json" }).$type<string[]>().notNull(),
    score: real("score").notNull(),
    fixPlan: text("fix_plan", { mode: "json" }).$type<string[]>().notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [index("review_artifacts_run_idx").on(t.runId, t.iteration)],
);

/** An iteration attempt's workspace snapshot (a commit in the session's git dir) and its diff. */
export const iterationSnapshots = sqliteTable(
  "iteration_snapshots",
  {
    runId: text("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    n: integer("n").notNull(),
    attempt: integer("attempt").notNull(),
    snapshotId: text("snapshot_id").notNull(),
    parentId: text("parent_id").notNull(),
    diff: text("diff").notNull(),
    diffBytes: integer("diff_bytes").notNull(),
    diffTruncated: integer("diff_truncated", { mode: "boolean" }).notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.n, t.attempt] })],
);

/** A run's whole change: baseline snapshot → latest snapshot, as a patch. */
export const runChanges = sqliteTable("run_changes", {
  runId: text("run_id")
    .primaryKey()
    .references(() => runs.id, { onDelete: "cascade" }),
  baselineSnapshot: text("baseline_snapshot").notNull(),
  headSnapshot: text("head_snapshot").notNull(),
  iteration: integer("iteration").notNull(),
  files: text("files", { mode: "json" }).$type<string[]>().notNull(),
  stat: text("stat").notNull(),
  /** Null when the patch is larger than the worker stores. */
  patch: text("patch"),
  patchBytes: integer("patch_bytes").notNull(),
  updatedAt: integer("updated_at").notNull(),
});

/** What a pipeline phase produced (planning, architecture, design, packaging). */
export const phaseArtifacts = sqliteTable(
  "phase_artifacts",
  {
    runId: text("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    phase: text("phase").notNull(),
    content: text("content").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.phase] })],
);

/** `Idempotency-Key` of a submit: the same key and body give the same run. */
export const idempotencyKeys = sqliteTable(
  "idempotency_keys",
  {
    key: text("key").primaryKey(),
    requestHash: text("request_hash").notNull(),
    runId: text("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    createdAt: integer("created_at").notNull(),
  },
  // A run's key, found without a scan: when retention deletes the run (the cascade, and its
  // check that the key is past its 24 hours).
  (t) => [index("idempotency_keys_run_id_idx").on(t.runId)],
);

/**
 * A workspace being restored by a rollback (`POST /api/runs/:id/rollback`): while its hold
 * lasts, no run starts there (a worker waits), and no second rollback begins. Expires by
 * itself if the API dies mid-restore.
 */
export const workspaceHolds = sqliteTable("workspace_holds", {
  workspace: text("workspace").primaryKey(),
  /** The run whose snapshot is being restored. */
  runId: text("run_id").notNull(),
  expiresAt: integer("expires_at").notNull(),
});

/**
 * What earlier runs learned: per tool and argument shape (`scope: "tool"`), or per validation
 * command in a workspace (`scope: "command"`), how often it succeeded and failed, its last
 * errors and mean duration. Fed back to the agent and the planner of later runs.
 */
export const failurePatterns = sqliteTable(
  "failure_patterns",
  {
    scope: text("scope").notNull(),
    /** The workspace the pattern was seen in ("" when it holds across workspaces). */
    workspace: text("workspace").notNull(),
    /** `server.tool` for a tool, the command line for a validation command. */
    subject: text("subject").notNull(),
    /** The argument shape of a tool call (keys and value types), "" for a command. */
    shape: text("shape").notNull(),
    successes: integer("successes").notNull().default(0),
    failures: integer("failures").notNull().default(0),
    totalDurationMs: integer("total_duration_ms").notNull().default(0),
    /** The latest error texts, newest first, each capped. */
    lastErrors: text("last_errors", { mode: "json" }).$type<string[]>().notNull(),
    lastRunId: text("last_run_id"),
    lastSeenAt: integer("last_seen_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.scope, t.workspace, t.subject, t.shape] }),
    index("failure_patterns_workspace_idx").on(t.workspace, t.scope),
  ],
);

/*
 * Hourly sums behind `GET /api/stats` and `GET /api/stats/tools`, so that they read a few
 * thousand rows instead of every run, iteration and tool call. `hour` is
 * `floor(created_at / 3600000)` (of the run for runs and iterations, of the call for tool
 * calls). SQLite triggers (migration 0008_stats_hourly_triggers) keep them up to date inside
 * the transaction of every write to runs, iterations and tool_calls; stats-hourly.ts reads whole
 * days from the daily sums below, whole hours from these at the ends of a window, and the rows
 * themselves at its edges.
 */

/** The summed columns of the run sums (hourly and daily): new builders for each table. */
const runSums = () => ({
  runs: integer("runs").notNull(),
  /** Sum of `metrics.iterations`, and how many runs had it. */
  iterations: integer("iterations").notNull(),
  iterationsRuns: integer("iterations_runs").notNull(),
  validationFailures: integer("validation_failures").notNull(),
  reviewBlockings: integer("review_blockings").notNull(),
  /** Sum of `finished_at - started_at`, and how many runs had both. */
  durationMs: integer("duration_ms").notNull(),
  durationRuns: integer("duration_runs").notNull(),
});

/** The summed columns of the iteration sums. */
const iterationSums = () => ({
  iterations: integer("iterations").notNull(),
  /** Sum of `finished_at - started_at`, and how many iterations had a `finished_at`. */
  durationMs: integer("duration_ms").notNull(),
  timed: integer("timed").notNull(),
});

/** The summed columns of the tool call sums. */
const toolSums = () => ({
  calls: integer("calls").notNull(),
  failures: integer("failures").notNull(),
  durationMs: integer("duration_ms").notNull(),
});

/** Runs by creation hour, status and reason (`""` for none). */
export const runStatsHourly = sqliteTable(
  "run_stats_hourly",
  {
    hour: integer("hour").notNull(),
    status: text("status").notNull(),
    reason: text("reason").notNull(),
    ...runSums(),
  },
  (t) => [primaryKey({ columns: [t.hour, t.status, t.reason] })],
);

/** Decided iterations (passed or failed) by their run's creation hour and outcome (`""` for none). */
export const iterationStatsHourly = sqliteTable(
  "iteration_stats_hourly",
  {
    hour: integer("hour").notNull(),
    outcome: text("outcome").notNull(),
    ...iterationSums(),
  },
  (t) => [primaryKey({ columns: [t.hour, t.outcome] })],
);

/** Tool calls by hour, server and tool. */
export const toolStatsHourly = sqliteTable(
  "tool_stats_hourly",
  {
    hour: integer("hour").notNull(),
    server: text("server").notNull(),
    tool: text("tool").notNull(),
    ...toolSums(),
  },
  (t) => [primaryKey({ columns: [t.hour, t.server, t.tool] })],
);

/** Failed tool calls by hour, server, tool and error (the first 200 characters of the result). */
export const toolErrorsHourly = sqliteTable(
  "tool_errors_hourly",
  {
    hour: integer("hour").notNull(),
    server: text("server").notNull(),
    tool: text("tool").notNull(),
    error: text("error").notNull(),
    count: integer("count").notNull(),
  },
  (t) => [primaryKey({ columns: [t.hour, t.server, t.tool, t.error] })],
);

/*
 * The same sums by day (`day` is `floor(hour / 24)`, UTC), so that a window of months reads a
 * few hundred rows rather than thousands of hours. Triggers on the hourly tables (migration
 * 0013_stats_daily) carry every change of an hourly row into its day's, in the same
 * transaction: a day holds exactly the sums of its hours.
 */

/** Runs by creation day, status and reason (`""` for none). */
export const runStatsDaily = sqliteTable(
  "run_stats_daily",
  {
    day: integer("day").notNull(),
    status: text("status").notNull(),
    reason: text("reason").notNull(),
    ...runSums(),
  },
  (t) => [primaryKey({ columns: [t.day, t.status, t.reason] })],
);

/** Decided iterations by their run's creation day and outcome. */
export const iterationStatsDaily = sqliteTable(
  "iteration_stats_daily",
  {
    day: integer("day").notNull(),
    outcome: text("outcome").notNull(),
    ...iterationSums(),
  },
  (t) => [primaryKey({ columns: [t.day, t.outcome] })],
);

/** Tool calls by day, server and tool. */
export const toolStatsDaily = sqliteTable(
  "tool_stats_daily",
  {
    day: integer("day").notNull(),
    server: text("server").notNull(),
    tool: text("tool").notNull(),
    ...toolSums(),
  },
  (t) => [primaryKey({ columns: [t.day, t.server, t.tool] })],
);

/** Failed tool calls by day, server, tool and error. */
export const toolErrorsDaily = sqliteTable(
  "tool_errors_daily",
  {
    day: integer("day").notNull(),
    server: text("server").notNull(),
    tool: text("tool").notNull(),
    error: text("error").notNull(),
    count: integer("count").notNull(),
  },
  (t) => [primaryKey({ columns: [t.day, t.server, t.tool, t.error] })],
);
