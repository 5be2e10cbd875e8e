import {
  AgentSpec,
  APPROVAL_MODES,
  EVENT_TYPES,
  McpServerSpec,
  PIPELINE_PHASES,
  ReviewSpec,
  RUN_STATUSES,
} from "@looprun/core";
import { z } from "zod";

// What the API answers, as zod schemas: the OpenAPI document is generated from them, and the
// tests parse real responses with them, so the document cannot drift from the presenters.

const isoDate = z.iso.datetime();
const nullableDate = isoDate.nullable();

export const ErrorBody = z.object({
  error: z
    .object({
      code: z.string(),
      message: z.string(),
      issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
      activeRunId: z.string().optional(),
    })
    .catchall(z.unknown()),
});

export const RunMetricsView = z.object({
  iterations: z.number().int(),
  validationFailures: z.number().int(),
  reviewBlockings: z.number().int(),
  toolCalls: z.number().int(),
  toolFailures: z.number().int(),
  tokens: z.number().int(),
});

export const RunView = z.object({
  id: z.string(),
  sessionId: z.string(),
  task: z.string(),
  requirements: z.string().nullable(),
  filePaths: z.array(z.string()),
  workspace: z.string(),
  /** The submitted `testCommand`, or null. */
  testCommand: z.string().nullable(),
  /** Every command validation runs: the `testCommand` first, then the `validationCommands`. */
  validationCommands: z.array(z.string()),
  validationTimeoutMs: z.number().int(),
  completionPromise: z.string().nullable(),
  agent: AgentSpec,
  mcpServers: z.array(McpServerSpec).optional(),
  review: ReviewSpec,
  /** The run's `phases` as submitted (empty: none beyond the loop's own). */
  phases: z.array(z.enum(PIPELINE_PHASES)),
  cooldownMs: z.number().int(),
  maxTokens: z.number().int().nullable(),
  status: z.enum(RUN_STATUSES),
  reason: z.string().nullable(),
  summary: z.string().nullable(),
  successThreshold: z.number().optional(),
  maxStalledIterations: z.number().int().optional(),
  /** Whether the workspace is put back as before the run when the run ends `failed`. */
  rollbackOnFailure: z.boolean().optional(),
  /** The run's `approval` setting. */
  approvalMode: z.enum(APPROVAL_MODES).optional(),
  /** What the run waits for a person to approve or answer (`awaiting_approval`); null otherwise. */
  approval: z
    .object({
      kind: z.enum(["plan", "question"]),
      /** The iteration that asked (0: the plan before iteration 1). */
      iteration: z.number().int(),
      /** The blocked agent's question (null for a plan). */
      question: z.string().nullable(),
      /** The plan to approve, as text (null for a question). */
      plan: z.string().nullable(),
      requestedAt: isoDate,
    })
    .nullable()
    .optional(),
  /** Succeeded although some validation commands failed (under `successThreshold`). */
  partial: z.boolean().optional(),
  gates: z
    .object({ passed: z.number().int(), total: z.number().int(), failed: z.array(z.string()) })
    .nullable()
    .optional(),
  iteration: z.number().int(),
  budget: z.object({
    maxIterations: z.number().int(),
    maxMinutes: z.number(),
    elapsedMs: z.number().int(),
    remainingIterations: z.number().int(),
    deadlineAt: nullableDate,
    /** Time spent waiting for a person (`awaiting_approval`): not in `elapsedMs`. */
    pausedMs: z.number().int().optional(),
  }),
  progress: z.string().nullable(),
  metrics: RunMetricsView,
  latestReviewId: z.string().nullable(),
  snapshots: z
    .object({ baseline: z.string().nullable(), latest: z.string().nullable() })
    .optional(),
  createdAt: isoDate,
  startedAt: nullableDate,
  finishedAt: nullableDate,
});

const ToolTotals = z.object({
  calls: z.number().int(),
  failures: z.number().int(),
  successRate: z.number().nullable(),
  meanDurationMs: z.number().nullable(),
});
const CommonError = z.object({
  server: z.string(),
  tool: z.string(),
  error: z.string(),
  count: z.number().int(),
});

export const RunDetail = RunView.extend({
  toolStats: ToolTotals.extend({ commonErrors: z.array(CommonError) }),
  /** How the run converges on its gates. */
  convergence: z.object({
    /** Iterations finished. */
    iterations: z.number().int(),
    /** From `startedAt` to `finishedAt` (or now, while it runs); null before it started. */
    totalTimeMs: z.number().int().nullable(),
    validationFailures: z.number().int(),
    reviewBlockings: z.number().int(),
    /** Blocking issues of a review that the next review no longer reports. */
    issuesFixedAutomatically: z.number().int(),
    /** Blocking issues of the latest review. */
    issuesRemaining: z.number().int(),
  }),
});

export const RunList = z.object({ items: z.array(RunView), nextCursor: z.string().nullable() });

export const RunAccepted = z.object({
  id: z.string(),
  sessionId: z.string(),
  status: z.literal("queued"),
  createdAt: isoDate,
});

export const StopAccepted = z.object({ id: z.string(), status: z.enum(["stopping", "stopped"]) });

/** Approved or answered: the run is queued to go on. */
export const ApprovalAccepted = z.object({ id: z.string(), status: z.literal("queued") });
/** Rejected: the run ended `stopped`. */
export const ApprovalRejected = z.object({ id: z.string(), status: z.literal("stopped") });

export const RollbackApplied = z.object({
  id: z.string(),
  iteration: z.number().int(),
  snapshot: z.string(),
  /** The workspace as it was just before the rollback (a snapshot, kept). */
  before: z.string(),
  files: z.array(z.object({ path: z.string(), change: z.enum(["restored", "removed"]) })),
});

const CommandOutcome = z.object({
  exitCode: z.number().int().nullable(),
  output: z.string(),
  durationMs: z.number().int(),
});

export const IterationView = z.object({
  n: z.number().int(),
  attempt: z.number().int(),
  status: z.enum(["running", "passed", "failed", "abandoned"]),
  outcome: z.string().nullable(),
  prompt: z.string(),
  agent: CommandOutcome.nullable(),
  validation: z.array(CommandOutcome.extend({ command: z.string() })),
  reviewId: z.string().nullable(),
  snapshot: z
    .object({
      id: z.string(),
      parentId: z.string().nullable(),
      diffBytes: z.number().int(),
      diffTruncated: z.boolean(),
    })
    .nullable()
    .optional(),
  feedback: z.string().nullable(),
  startedAt: isoDate,
  finishedAt: nullableDate,
});
export const IterationList = z.object({ items: z.array(IterationView) });

const BudgetSnapshotView = z.object({
  elapsedMs: z.number(),
  remainingIterations: z.number().int(),
  reason: z.string().optional(),
});

export const EventView = z.object({
  seq: z.number().int().min(1),
  type: z.enum(EVENT_TYPES),
  at: isoDate,
  data: z
    .object({
      budget: BudgetSnapshotView,
      // The snapshot's figures, spread into the data itself.
      elapsedMs: BudgetSnapshotView.shape.elapsedMs,
      remainingIterations: BudgetSnapshotView.shape.remainingIterations,
    })
    .catchall(z.unknown()),
});
export const EventList = z.object({ items: z.array(EventView) });

export const ToolCallView = z.object({
  iteration: z.number().int(),
  seq: z.number().int(),
  server: z.string(),
  tool: z.string(),
  args: z.unknown(),
  isError: z.boolean(),
  result: z.string(),
  durationMs: z.number().int(),
  createdAt: isoDate,
});
export const ToolCallList = z.object({ items: z.array(ToolCallView) });

export const ReviewView = z.object({
  id: z.string(),
  runId: z.string(),
  sessionId: z.string(),
  phase: z.literal("review"),
  iteration: z.number().int(),
  blockingIssues: z.array(z.string()),
  nonBlockingIssues: z.array(z.string()),
  score: z.number().min(0).max(100),
  fixPlan: z.array(z.string()),
  createdAt: isoDate,
});
export const ReviewList = z.object({ items: z.array(ReviewView) });

export const SessionView = z.object({
  id: z.string(),
  workspace: z.string(),
  createdAt: isoDate,
  activeRunId: z.string().nullable(),
  runs: z.array(RunView),
});

export const ToolStatsView = z.object({
  totals: ToolTotals,
  tools: z.array(
    z.object({
      server: z.string(),
      tool: z.string(),
      calls: z.number().int(),
      failures: z.number().int(),
      successRate: z.number(),
      meanDurationMs: z.number(),
    }),
  ),
  commonErrors: z.array(CommonError),
  /** Learning across runs: what tools (by argument shape) and validation commands did per workspace. */
  patterns: z.array(
    z.object({
      scope: z.enum(["tool", "command"]),
      workspace: z.string(),
      /** `server.tool`, or the validation command line. */
      subject: z.string(),
      /** The tool call's argument shape (keys and value types), "" for a command. */
      shape: z.string(),
      successes: z.number().int(),
      failures: z.number().int(),
      meanDurationMs: z.number().int(),
      /** The latest errors, newest first. */
      lastErrors: z.array(z.string()),
      lastRunId: z.string().nullable(),
      lastSeenAt: isoDate,
    }),
  ),
});

const Count = (key: string) => z.object({ [key]: z.string(), count: z.number().int() });

export const ConvergenceStatsView = z.object({
  window: z.object({ since: nullableDate, until: nullableDate }),
  runs: z.object({
    total: z.number().int(),
    byStatus: z.record(z.enum(RUN_STATUSES), z.number().int()),
  }),
  successRate: z.number().nullable(),
  meanIterationsToConverge: z.number().nullable(),
  meanTimeToConvergeMs: z.number().nullable(),
  meanIterationTimeMs: z.number().nullable(),
  iterations: z.number().int(),
  validationFailures: z.number().int(),
  reviewBlockings: z.number().int(),
  commonFailureReasons: z.array(Count("reason")),
  iterationOutcomes: z.array(Count("outcome")),
});

export const ArtifactList = z.object({
  items: z.array(z.object({ phase: z.string(), content: z.unknown(), createdAt: isoDate })),
  change: z
    .object({
      baselineSnapshot: z.string(),
      headSnapshot: z.string(),
      iteration: z.number().int(),
      files: z.unknown(),
      stat: z.unknown(),
      patchBytes: z.number().int(),
      patchStored: z.boolean(),
      updatedAt: isoDate,
    })
    .nullable(),
});

export const Readiness = z.object({ redis: z.enum(["up", "down"]), db: z.enum(["up", "down"]) });
