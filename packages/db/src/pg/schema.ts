/*
 * The PostgreSQL twin of ../schema.ts: the same tables and columns (names, nullability,
 * defaults, keys and indexes), so that the TypeScript row types are identical and the query
 * code reads the same on both engines. schema-parity.test.ts compares the two.
 *
 * Type mapping: epoch-ms times, durations and sums are `bigint` read as numbers (exact up to
 * 2^53); counters are `integer`; SQLite's JSON text is `json` — stored as written, so objects
 * come back with their keys in the order they were written, as on SQLite (`jsonb` sorts them,
 * and the API's answers would differ between engines); its 0/1 booleans are `boolean`; `real`
 * is `double precision`.
 */
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
  bigint,
  boolean,
  customType,
  doublePrecision,
  index,
  integer,
  json,
  pgTable,
  primaryKey,
  text,
  uniqueIndex,
} from "drizzle-orm/pg-core";

/** An epoch-ms time, a duration, a size or a sum of them: 64 bits, read as a number. */
const int8 = (name: string) => bigint(name, { mode: "number" });

/**
 * Run ids are ULIDs and pages walk them with `<` and `ORDER BY`: byte order, as in SQLite,
 * whatever the database's default collation (a linguistic one ignores `-` and case). Every
 * column holding a run id has it: a comparison across two collations (`i.run_id = r.id` in a
 * join, a trigger) has none, and no index can serve it — such lookups scanned whole tables.
 */
const byteOrderedText = customType<{ data: string; driverData: string }>({
  dataType: () => 'text COLLATE "C"',
});

export const sessions = pgTable("sessions", {
  id: text("id").primaryKey(),
  workspace: text("workspace").notNull(),
  createdAt: int8("created_at").notNull(),
});

export const runs = pgTable(
  "runs",
  {
    id: byteOrderedText("id").primaryKey(),
    sessionId: text("session_id")
      .notNull()
      .references(() => sessions.id),
    task: text("task").notNull(),
    spec: json("spec").$type<RunSpec>().notNull(),
    workspace: text("workspace").notNull(),
    status: text("status").notNull(),
    reason: text("reason"),
    summary: text("summary"),
    iteration: integer("iteration").notNull().default(0),
    progress: text("progress"),
    metrics: json("metrics").$type<RunMetrics>().notNull(),
    consecutiveFailures: integer("consecutive_failures").notNull().default(0),
    stalledIterations: integer("stalled_iterations").notNull().default(0),
    partial: json("partial").$type<PartialSuccess>(),
    epoch: integer("epoch").notNull().default(0),
    latestReviewId: text("latest_review_id"),
    baselineSnapshot: text("baseline_snapshot"),
    latestSnapshot: text("latest_snapshot"),
    plan: json("plan").$type<Plan>(),
    activePgid: integer("active_pgid"),
    /** Set while the run is `awaiting_approval`: what a person must approve or answer. */
    approval: json("approval").$type<ApprovalRequest>(),
    /** Time spent awaiting approval: the budget clock does not count it. */
    pausedMs: int8("paused_ms").notNull().default(0),
    createdAt: int8("created_at").notNull(),
    startedAt: int8("started_at"),
    finishedAt: int8("finished_at"),
    deadlineAt: int8("deadline_at"),
    stopRequestedAt: int8("stop_requested_at"),
  },
  (t) => [
    // The source of truth for "one active run per session".
    uniqueIndex("runs_one_active_per_session")
      .on(t.sessionId)
      .where(sql`status in ('queued', 'running', 'awaiting_approval', 'stopping')`),
    index("runs_session_id_idx").on(t.sessionId, t.id),
    index("runs_status_id_idx").on(t.status, t.id),
    index("runs_created_at_idx").on(t.createdAt),
  ],
);

export const iterations = pgTable(
  "iterations",
  {
    runId: byteOrderedText("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    n: integer("n").notNull(),
    attempt: integer("attempt").notNull(),
    status: text("status").notNull(),
    outcome: text("outcome"),
    prompt: text("prompt").notNull(),
    agent: json("agent").$type<AgentResult>(),
    validation: json("validation").$type<ValidationResult[]>().notNull(),
    reviewId: text("review_id"),
    feedback: text("feedback"),
    startedAt: int8("started_at").notNull(),
    finishedAt: int8("finished_at"),
  },
  (t) => [primaryKey({ columns: [t.runId, t.n, t.attempt] })],
);

export const events = pgTable(
  "events",
  {
    runId: byteOrderedText("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    seq: integer("seq").notNull(),
    type: text("type").notNull(),
    at: int8("at").notNull(),
    data: json("data").$type<Record<string, unknown>>().notNull(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.seq] })],
);

export const toolCalls = pgTable(
  "tool_calls",
  {
    runId: byteOrderedText("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    seq: integer("seq").notNull(),
    iteration: integer("iteration").notNull(),
    server: text("server").notNull(),
    tool: text("tool").notNull(),
    args: json("args").$type<unknown>().notNull(),
    isError: boolean("is_error").notNull(),
    result: text("result").notNull(),
    durationMs: int8("duration_ms").notNull(),
    createdAt: int8("created_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.runId, t.seq] }),
    index("tool_calls_failures_idx").on(t.runId, t.isError),
    index("tool_calls_created_at_idx").on(t.createdAt),
  ],
);

export const reviewArtifacts = pgTable(
  "review_artifacts",
  {
    id: text("id").primaryKey(),
    runId: byteOrderedText("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    sessionId: text("session_id").notNull(),
    phase: text("phase").notNull().default("review"),
    iteration: integer("iteration").notNull(),
    blockingIssues: json("blocking_issues").$type<string[]>().notNull(),
    nonBlockingIssues: json("non_blocking_issues").$type<string[]>().notNull(),
    score: doublePrecision("score").notNull(),
    fixPlan: json("fix_plan").$type<string[]>().notNull(),
    createdAt: int8("created_at").notNull(),
  },
  (t) => [index("review_artifacts_run_idx").on(t.runId, t.iteration)],
);

/** An iteration attempt's workspace snapshot (a commit in the session's git dir) and its diff. */
export const iterationSnapshots = pgTable(
  "iteration_snapshots",
  {
    runId: byteOrderedText("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    n: integer("n").notNull(),
    attempt: integer("attempt").notNull(),
    snapshotId: text("snapshot_id").notNull(),
    parentId: text("parent_id").notNull(),
    diff: text("diff").notNull(),
    diffBytes: int8("diff_bytes").notNull(),
    diffTruncated: boolean("diff_truncated").notNull(),
    createdAt: int8("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.n, t.attempt] })],
);

/** A run's whole change: baseline snapshot → latest snapshot, as a patch. */
export const runChanges = pgTable("run_changes", {
  runId: byteOrderedText("run_id")
    .primaryKey()
    .references(() => runs.id, { onDelete: "cascade" }),
  baselineSnapshot: text("baseline_snapshot").notNull(),
  headSnapshot: text("head_snapshot").notNull(),
  iteration: integer("iteration").notNull(),
  files: json("files").$type<string[]>().notNull(),
  stat: text("stat").notNull(),
  /** Null when the patch is larger than the worker stores. */
  patch: text("patch"),
  patchBytes: int8("patch_bytes").notNull(),
  updatedAt: int8("updated_at").notNull(),
});

/** What a pipeline phase produced (planning, architecture, design, packaging). */
export const phaseArtifacts = pgTable(
  "phase_artifacts",
  {
    runId: byteOrderedText("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    phase: text("phase").notNull(),
    content: text("content").notNull(),
    createdAt: int8("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.phase] })],
);

/** `Idempotency-Key` of a submit: the same key and body give the same run. */
export const idempotencyKeys = pgTable(
  "idempotency_keys",
  {
    key: text("key").primaryKey(),
    requestHash: text("request_hash").notNull(),
    runId: byteOrderedText("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    createdAt: int8("created_at").notNull(),
  },
  (t) => [index("idempotency_keys_run_id_idx").on(t.runId)],
);

/** A workspace being restored by a rollback (see ../schema.ts). */
export const workspaceHolds = pgTable("workspace_holds", {
  workspace: text("workspace").primaryKey(),
  runId: byteOrderedText("run_id").notNull(),
  expiresAt: int8("expires_at").notNull(),
});

/** What earlier runs learned (see ../schema.ts). */
export const failurePatterns = pgTable(
  "failure_patterns",
  {
    scope: text("scope").notNull(),
    workspace: text("workspace").notNull(),
    subject: text("subject").notNull(),
    shape: text("shape").notNull(),
    successes: integer("successes").notNull().default(0),
    failures: integer("failures").notNull().default(0),
    totalDurationMs: int8("total_duration_ms").notNull().default(0),
    lastErrors: json("last_errors").$type<string[]>().notNull(),
    lastRunId: byteOrderedText("last_run_id"),
    lastSeenAt: int8("last_seen_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.scope, t.workspace, t.subject, t.shape] }),
    index("failure_patterns_workspace_idx").on(t.workspace, t.scope),
  ],
);

/*
 * Hourly sums behind the statistics (see ../schema.ts and ../stats-hourly.ts). SQLite keeps
 * them with triggers; their PostgreSQL counterparts arrive with the PostgreSQL statistics
 * queries, whose migration fills them from the rows written until then.
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
  durationMs: int8("duration_ms").notNull(),
  durationRuns: integer("duration_runs").notNull(),
});

/** The summed columns of the iteration sums. */
const iterationSums = () => ({
  iterations: integer("iterations").notNull(),
  /** Sum of `finished_at - started_at`, and how many iterations had a `finished_at`. */
  durationMs: int8("duration_ms").notNull(),
  timed: integer("timed").notNull(),
});

/** The summed columns of the tool call sums. */
const toolSums = () => ({
  calls: integer("calls").notNull(),
  failures: integer("failures").notNull(),
  durationMs: int8("duration_ms").notNull(),
});

export const runStatsHourly = pgTable(
  "run_stats_hourly",
  {
    hour: integer("hour").notNull(),
    status: text("status").notNull(),
    reason: text("reason").notNull(),
    ...runSums(),
  },
  (t) => [primaryKey({ columns: [t.hour, t.status, t.reason] })],
);

export const iterationStatsHourly = pgTable(
  "iteration_stats_hourly",
  {
    hour: integer("hour").notNull(),
    outcome: text("outcome").notNull(),
    ...iterationSums(),
  },
  (t) => [primaryKey({ columns: [t.hour, t.outcome] })],
);

export const toolStatsHourly = pgTable(
  "tool_stats_hourly",
  {
    hour: integer("hour").notNull(),
    server: text("server").notNull(),
    tool: text("tool").notNull(),
    ...toolSums(),
  },
  (t) => [primaryKey({ columns: [t.hour, t.server, t.tool] })],
);

export const toolErrorsHourly = pgTable(
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
 * The same sums by day (`day` is `floor(hour / 24)`; ../schema.ts), written with the hourly
 * ones by the functions that fold a finished run in (drizzle-pg/0008_stats_daily).
 */

export const runStatsDaily = pgTable(
  "run_stats_daily",
  {
    day: integer("day").notNull(),
    status: text("status").notNull(),
    reason: text("reason").notNull(),
    ...runSums(),
  },
  (t) => [primaryKey({ columns: [t.day, t.status, t.reason] })],
);

export const iterationStatsDaily = pgTable(
  "iteration_stats_daily",
  {
    day: integer("day").notNull(),
    outcome: text("outcome").notNull(),
    ...iterationSums(),
  },
  (t) => [primaryKey({ columns: [t.day, t.outcome] })],
);

export const toolStatsDaily = pgTable(
  "tool_stats_daily",
  {
    day: integer("day").notNull(),
    server: text("server").notNull(),
    tool: text("tool").notNull(),
    ...toolSums(),
  },
  (t) => [primaryKey({ columns: [t.day, t.server, t.tool] })],
);

export const toolErrorsDaily = pgTable(
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
