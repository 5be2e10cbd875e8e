import type { SessionRunSummary, ToolFailure } from "../agents/session-context";
import type { ApprovalRequest } from "../domain/approval";
import type { PhaseArtifact, ReviewArtifact } from "../domain/artifacts";
import type { NewEvent } from "../domain/events";
import type { Plan } from "../domain/plan";
import type {
  IterationRecord,
  NewToolCall,
  PartialSuccess,
  RunMetrics,
  RunReason,
  RunRecord,
  RunStatus,
} from "../domain/run";
import type { IterationSnapshot, RunChange } from "../domain/snapshots";
import type { FailurePattern } from "../learning/patterns";

export interface RunPatch {
  status?: RunStatus;
  reason?: RunReason | null;
  summary?: string | null;
  iteration?: number;
  progress?: string | null;
  metrics?: RunMetrics;
  consecutiveFailures?: number;
  stalledIterations?: number;
  partial?: PartialSuccess | null;
  latestReviewId?: string | null;
  baselineSnapshot?: string | null;
  latestSnapshot?: string | null;
  plan?: Plan | null;
  approval?: ApprovalRequest | null;
  pausedMs?: number;
  activePgid?: number | null;
  startedAt?: number;
  finishedAt?: number;
  deadlineAt?: number;
}

export type IterationPatch = Partial<
  Pick<
    IterationRecord,
    "status" | "outcome" | "agent" | "validation" | "reviewId" | "feedback" | "finishedAt"
  >
>;

/** Everything one step of the engine writes, applied atomically. */
export interface RunMutation {
  run?: RunPatch;
  insertIteration?: IterationRecord;
  updateIteration?: { n: number; attempt: number; patch: IterationPatch };
  /** Appended in order; the store assigns gap-free `seq` numbers and `at`. */
  events?: NewEvent[];
  /** Appended in order; the store numbers them per run. */
  toolCalls?: NewToolCall[];
  /** A reviewed iteration's artifact (the iteration's `reviewId` and the run's `latestReviewId` point to it). */
  insertReview?: ReviewArtifact;
  /** Iterations' workspace snapshots and their diffs (one per iteration attempt). */
  insertSnapshots?: IterationSnapshot[];
  /** The run's whole change so far (replaces the previous one). */
  change?: RunChange;
  /** A pipeline phase's artifact (replaces an earlier one of the same phase). */
  phaseArtifact?: PhaseArtifact;
}

/** What an engine write may carry besides the run patch and the events. */
export type MutationExtras = Omit<RunMutation, "run" | "events">;

export interface ClaimedRun {
  run: RunRecord;
  /** The latest iteration record (highest n, then attempt), if any. */
  lastIteration: IterationRecord | null;
  /** The latest iteration that reached a decision (passed or failed), if any. */
  lastDecided: IterationRecord | null;
  /** This claim started the run (see ClaimStart): no worker ran any of it before. */
  started: boolean;
}

/**
 * A run's first start, written by the claim itself: in the claim's transaction, when the run
 * is queued, was never started and no rollback holds its workspace at `now`, the store
 * applies `mutation(run)` (the run as claimed, at its new epoch) as a commit would. One write
 * instead of two, and the run is marked started before the worker does anything else.
 */
export interface ClaimStart {
  now: number;
  mutation(run: RunRecord): RunMutation;
}

/** What asking for a workspace's hold gave (see RunStore.holdWorkspaceFor). */
export type WorkspaceHold =
  | { held: true }
  | { held: false; activeRunId?: string | undefined; heldByRun?: string | undefined };

/**
 * The persistence port of the engine. Implementations apply each call atomically
 * (SQLite: `BEGIN IMMEDIATE`).
 */
export interface RunStore {
  /**
   * Takes a run for this caller: increments its epoch (fencing every older holder) and
   * returns it. A finished run is returned unchanged; a missing one gives `null`. With
   * `start`, a run that can start is returned started (see ClaimStart).
   */
  claimRun(runId: string, start?: ClaimStart): Promise<ClaimedRun | null>;
  /**
   * Applies a mutation if the run's epoch still equals `epoch`, else throws `LeaseLostError`.
   * A stop request is sticky: a patch that sets `running` leaves `stopping` in place.
   */
  commit(runId: string, epoch: number, mutation: RunMutation, now: number): Promise<RunRecord>;
  getRun(runId: string): Promise<RunRecord | null>;
  /** The session's runs created before `runId`, newest first. */
  sessionHistory(sessionId: string, runId: string, limit: number): Promise<SessionRunSummary[]>;
  /** The run's failed tool calls, oldest first (the latest `limit`). */
  toolFailures(runId: string, limit: number): Promise<ToolFailure[]>;
  /**
   * What earlier runs learned in a workspace (see `learning/`): the patterns a prompt is chosen
   * from (`promptCandidates`: what failed, and apart from it what succeeded most), the most
   * failures first, then the most recent. Commits fold their tool calls and the validation
   * results of the iterations they decide into these patterns, in the same transaction.
   */
  failurePatterns(workspace: string, limit: number): Promise<FailurePattern[]>;
  /** The run's pipeline phase artifacts, in phase order. */
  phaseArtifacts(runId: string): Promise<PhaseArtifact[]>;
  /**
   * Until when a rollback holds the run's workspace (it is being restored: no run may start
   * there) or its session (another of the session's workspaces is being restored, with the
   * session's snapshot store, which the run's snapshots write to), or null.
   */
  workspaceHeldUntil(
    run: Pick<RunRecord, "workspace" | "sessionId">,
    now: number,
  ): Promise<number | null>;
  /**
   * Holds the run's workspace for its own rollback as it ends (rollbackOnFailure), as the
   * API's rollbacks hold one: refused while another run is active in the session or in an
   * overlapping workspace (one inside the other), naming it, or while a rollback holds it.
   * Runs submitted meanwhile wait for `releaseWorkspaceOf`.
   */
  holdWorkspaceFor(
    run: Pick<RunRecord, "id" | "workspace" | "sessionId">,
    now: number,
    ttlMs: number,
  ): Promise<WorkspaceHold>;
  releaseWorkspaceOf(run: Pick<RunRecord, "id" | "workspace" | "sessionId">): Promise<void>;
  /** Whether the snapshot row of an iteration attempt is stored (see RunContext.defer). */
  hasSnapshot(runId: string, n: number, attempt: number): Promise<boolean>;
  /**
   * Whether an error this store threw says that the database could not be reached or could
   * not apply the call for now (a server restarting, a connection cut, a deadlock's victim):
   * the step is handed back to try again later, rather than the run failed. A store whose
   * database is a file in this process (SQLite) has no such errors and need not say.
   */
  isUnavailable?(error: unknown): boolean;
}

/** Whether a claimed run is one `ClaimStart` starts (its workspace's hold checked apart). */
export function startsOnClaim(run: RunRecord): boolean {
  return run.status === "queued" && run.startedAt === null;
}

/** The rule every store applies when a patch sets a status. */
function mergeStatus(current: RunStatus, next: RunStatus | undefined): RunStatus {
  if (next === undefined) return current;
  // A stop request also wins over a pause for a person: the run ends instead of waiting.
  if (current === "stopping" && (next === "running" || next === "awaiting_approval"))
    return current;
  return next;
}

/**
 * What a patch changes in the row of a run whose status is `current`, as every store writes it:
 * the status merged (see mergeStatus), and left out when it stays as it is — set at all, even to
 * the value it has, SQLite rewrites the run's entries in the two indexes on it, two pages more
 * in the WAL for every commit (an iteration's commits wrote 31 pages, 23 without:
 * bench/RESULTS.md, the fortieth session). Empty: nothing to write.
 */
export function runRowChanges(current: RunStatus, patch: RunPatch | undefined): RunPatch {
  const { status: asked, ...rest } = patch ?? {};
  const status = mergeStatus(current, asked);
  return status === current ? rest : { ...rest, status };
}
