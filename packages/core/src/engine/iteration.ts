import { buildPrompt } from "../agents/prompt";
import { tokensLeft } from "../budget/budget";
import type { ReviewArtifact } from "../domain/artifacts";
import type { AgentResult, IterationRecord, ValidationResult } from "../domain/run";
import type { RunChange } from "../domain/snapshots";
import { PATTERNS_FOR_PROMPT } from "../learning/patterns";
import { assertNever } from "../util/assert-never";
import { describeShortfall, type GateReport, gateReport } from "../validation/gates";
import { runValidation, validationFeedback } from "../validation/validation-runner";
import { runAgentPhase } from "./agent-phase";
import { decideIteration, type IterationDecision } from "./decide";
import { type Interruption, watchInterruptions } from "./interruptions";
import type { EngineResources, StepOptions } from "./resources";
import { runReviewPhase } from "./review-phase";
import type { RunContext } from "./run-context";
import { type PendingSnapshot, snapshotIteration, snapshotsOf } from "./snapshot-step";
import { validationEvents } from "./validation-events";
import { workspaceMoved } from "./workspace-check";

/** What every result says of the iteration's validation. */
interface ValidationOutcome {
  /** Its gates, once weighed (see gateReport). */
  gates?: GateReport;
  /** Its validation event is written (when its review started): not again with the result. */
  validationRecorded?: boolean;
}

export type IterationResult = ValidationOutcome &
  (
    | {
        kind: "decided";
        decision: IterationDecision;
        agent: AgentResult;
        validation: ValidationResult[];
        /** The review of this iteration (not yet stored), when one ran. */
        review: { artifact: ReviewArtifact; notes: string | null } | null;
        /** The iteration's snapshot. */
        snapshotId: string;
        /** Its rows, when they are still to compute (see RunContext.deferSnapshot). */
        pending: PendingSnapshot | null;
        /** The run's change up to the snapshot, when its rows were computed already. */
        change: RunChange | null;
        /** The validation commands under the run's `successThreshold`. */
        gates: GateReport;
        /** The iteration changed the workspace (its snapshot differs from the previous one). */
        changed: boolean;
        /** The completion promise was asked for and not given (the agent's output lacks it). */
        promiseMissing: boolean;
      }
    | {
        kind: "phase_failed";
        phase: string;
        error: string;
        /** The iteration's snapshot, when it got that far. */
        snapshot?: string;
        /** The phases of the iteration that did not run because of it. */
        skipped: string[];
        agent: AgentResult;
        validation: ValidationResult[];
        /** The agent's phase failed: its `agent_finished` is not written yet. */
        agentUnrecorded?: boolean;
      }
    | {
        kind: "interrupted";
        why: Interruption;
        agent: AgentResult | null;
        validation: ValidationResult[];
        /** The interruption killed a validation command: its results say nothing of the change. */
        validationCut?: boolean;
        /** The interruption came as the agent ended: its `agent_finished` is not written yet. */
        agentUnrecorded?: boolean;
      }
  );

/**
 * Runs the agent, then the validation commands, snapshots the workspace, runs the reviewer
 * (when one is configured and every other gate passed), and decides; writes as it goes.
 */
export async function runIteration(
  res: EngineResources,
  ctx: RunContext,
  n: number,
  attempt: number,
  opts: StepOptions,
): Promise<IterationResult> {
  const { spec } = ctx.run;
  const [history, failures, phaseArtifacts, learned] = await Promise.all([
    ctx.sessionHistory(),
    ctx.toolFailures(),
    spec.phases.length > 0 ? res.store.phaseArtifacts(ctx.run.id) : [],
    res.store.failurePatterns(ctx.run.workspace, PATTERNS_FOR_PROMPT),
  ]);
  const startedAt = ctx.now();
  const record: IterationRecord = {
    runId: ctx.run.id,
    n,
    attempt,
    status: "running",
    outcome: null,
    prompt: buildPrompt({
      spec,
      iteration: n,
      feedback: ctx.lastDecided?.feedback ?? null,
      history,
      toolFailures: failures,
      phaseArtifacts,
      learned,
    }),
    agent: null,
    validation: [],
    reviewId: null,
    feedback: null,
    startedAt,
    finishedAt: null,
  };
  const agentLabel =
    spec.agent.type === "command"
      ? spec.agent.command
      : `mistral ${spec.agent.model ?? res.defaultModel ?? ""}`.trim();
  await ctx.commit(
    {
      iteration: n,
      progress: `iteration ${n}/${spec.maxIterations}: running agent: ${agentLabel}`,
    },
    [
      ["iteration_started", { iteration: n, attempt }],
      ["agent_started", { iteration: n, type: spec.agent.type, agent: agentLabel }],
    ],
    { insertIteration: record },
    // The previous iteration's snapshot rows are still to compute: written when ready.
    { keepDeferred: true },
  );
  ctx.lastIteration = record;
  // The snapshot rows of earlier iterations are computed beside this one (once it runs a while).
  ctx.scheduleRows();

  const watch = watchInterruptions(res, ctx, opts);
  try {
    const env = ctx.commandEnv(n);
    const outputCapBytes = res.outputCapBytes ?? 65_536;
    const left = () => (ctx.run.deadlineAt ?? Number.POSITIVE_INFINITY) - ctx.now();

    // The process group of the command in flight is recorded, so that whoever resumes the
    // run after a crash of this worker can kill what it left behind.
    const onSpawn = (pgid: number) => {
      ctx.commit({ activePgid: pgid }, [], {}, { keepDeferred: true }).catch((error: unknown) => {
        res.logger.warn({ err: error, runId: ctx.run.id }, "could not record the process group");
      });
    };
    // The files the snapshot will write are made while the validation runs, or while the agent
    // does when no validation command follows it (see WorkspaceSnapshots.makeAhead).
    if (spec.validationCommands.length === 0) snapshotsOf(res).makeAhead();
    const result = await runAgentPhase(res, ctx, {
      onSpawn,
      n,
      prompt: record.prompt,
      env,
      msLeft: left,
      outputCapBytes,
      signal: watch.signal,
    });
    const agent: AgentResult = {
      exitCode: result.exitCode,
      output: result.output,
      durationMs: result.durationMs,
    };
    const afterAgent = watch.interruption(left());
    if (afterAgent) {
      return { kind: "interrupted", why: afterAgent, agent, validation: [], agentUnrecorded: true };
    }
    // The agent may have swapped the workspace for a symlink (see workspace-check.ts).
    const failed = result.phaseFailed ?? movedWorkspace(ctx);
    if (failed) {
      return {
        kind: "phase_failed",
        ...failed,
        skipped: ["validation", "review"],
        agent,
        validation: [],
        agentUnrecorded: true,
      };
    }

    const total = spec.validationCommands.length;
    const validating = (index: number, command: string) =>
      `iteration ${n}/${spec.maxIterations}: running validation ${index + 1}/${total}: ${command}`;
    const first = spec.validationCommands[0];
    // The agent's end is written once the first validation command runs, with its process
    // group: not between the two commands (one write less on the iteration's path, 0.5 ms on
    // this machine); at once when there is no validation command.
    const agentEnd = (pgid: number | null) =>
      handledLater(
        ctx.commit(
          {
            activePgid: pgid,
            progress:
              first === undefined
                ? `iteration ${n}/${spec.maxIterations}: agent exited ${agent.exitCode}`
                : validating(0, first),
          },
          [
            [
              "agent_finished",
              { iteration: n, exitCode: agent.exitCode, durationMs: agent.durationMs },
            ],
          ],
          ctx.updateIteration({ agent }),
          // Not waiting for the previous iterations' snapshot rows: they are written when ready.
          { keepDeferred: true },
        ),
      );
    let agentWritten = first === undefined ? agentEnd(null) : null;
    let validation: Awaited<ReturnType<typeof runValidation>>;
    try {
      validation = await runValidation({
        commands: spec.validationCommands,
        workspace: ctx.run.workspace,
        env,
        timeoutMs: spec.validationTimeoutMs,
        deadlineMs: Math.max(1, left()),
        outputCapBytes,
        signal: watch.signal,
        onSpawn: (pgid) => {
          if (agentWritten === null) {
            agentWritten = agentEnd(pgid);
            snapshotsOf(res).makeAhead();
          } else onSpawn(pgid);
        },
        onCommandStart: async (index, command) => {
          if (index > 0)
            await ctx.commit(
              { progress: validating(index, command) },
              [],
              {},
              { keepDeferred: true },
            );
        },
      });
    } finally {
      // No validation command started (one could not be run, an interruption came first).
      agentWritten ??= agentEnd(null);
    }
    await agentWritten;
    const afterValidation = watch.interruption(left());
    if (afterValidation || validation.interrupted) {
      const why =
        afterValidation ?? (validation.interrupted === "deadline" ? "deadline" : "stopped");
      return {
        kind: "interrupted",
        why,
        agent,
        validation: validation.results,
        validationCut: validation.interrupted !== null,
      };
    }

    // Once the review starts, the validation's event is written (see below).
    let recorded: ValidationOutcome = {};
    const interrupted = (why: Interruption): IterationResult => ({
      kind: "interrupted",
      why,
      agent,
      validation: validation.results,
      ...recorded,
    });
    const hasReviewer = spec.review.type !== "none";

    // So may a validation command: the snapshot would read (and keep) what the link leads to.
    const moved = movedWorkspace(ctx);
    if (moved) {
      const skipped = hasReviewer ? ["review"] : [];
      return { kind: "phase_failed", ...moved, skipped, agent, validation: validation.results };
    }
    const snapshot = await snapshotIteration(res, ctx, n, attempt, watch.signal, !hasReviewer);
    const afterSnapshot = watch.interruption(left());
    if (afterSnapshot) return interrupted(afterSnapshot);
    if (!snapshot.ok) {
      return {
        kind: "phase_failed",
        phase: "snapshot",
        error: snapshot.error,
        skipped: hasReviewer ? ["review"] : [],
        agent,
        validation: validation.results,
      };
    }

    const gates = gateReport(validation.results, spec.successThreshold);
    const promiseFound = spec.completionPromise === null ? null : result.promiseFound === true;
    // The review only runs when every other gate passed: a reviewer's time (and tokens) is
    // not spent on a change that goes back anyway.
    let review: { artifact: ReviewArtifact; notes: string | null } | null = null;
    // A cut turn is the budget's end, not the agent's failure; an LLM reviewer needs tokens.
    let budgetSpent: "agent" | "review" | null = result.budgetSpent ? "agent" : null;
    const reviewDue = hasReviewer && gates.ok && promiseFound !== false;
    const reviewerSpends = spec.review.type === "mistral" || spec.review.type === "triangular";
    if (reviewDue && reviewerSpends && tokensLeft(ctx.run) <= 0) {
      budgetSpent = "review";
    } else if (reviewDue) {
      // The validation passed: watchers see it while the review runs, not after.
      recorded = { gates, validationRecorded: true };
      const reviewed = await runReviewPhase(res, ctx, {
        n,
        diff: snapshot.reviewDiff,
        validation: validation.results,
        validationEvents: validationEvents(n, validation.results, gates),
        env,
        msLeft: left,
        signal: watch.signal,
        onSpawn,
      });
      const afterReview = watch.interruption(left());
      if (afterReview) return interrupted(afterReview);
      if (!reviewed.ok && reviewed.budgetSpent) {
        // Spent between two of its calls (the triangular review's passes, a second ask).
        budgetSpent = "review";
      } else if (!reviewed.ok) {
        return {
          kind: "phase_failed",
          phase: "review",
          error: reviewed.error,
          snapshot: snapshot.snapshotId,
          skipped: [],
          agent,
          validation: validation.results,
          ...recorded,
        };
      } else {
        review = { artifact: reviewed.artifact, notes: reviewed.notes };
      }
    }

    // The feedback cuts the outputs of what failed again (their last lines): redacted first,
    // so that no cut leaves a piece of a secret that the whole text's redaction could no
    // longer recognise.
    const decision = decideIteration({
      agentExitCode: agent.exitCode,
      agentOutput: agent.exitCode === 0 ? agent.output : ctx.redact(agent.output),
      validationPassed: gates.ok,
      validationFeedback: validationFeedback(
        validation.results.map((r) =>
          r.exitCode === 0 ? r : { ...r, output: ctx.redact(r.output) },
        ),
        describeShortfall(gates, spec.successThreshold),
      ),
      promiseFound,
      promiseOther: result.promiseOther ?? null,
      completionPromise: spec.completionPromise,
      consecutiveFailures: ctx.run.consecutiveFailures,
      review: review?.artifact ?? null,
      blockedQuestion: result.blocked ?? null,
      budgetSpent,
    });
    return {
      kind: "decided",
      decision,
      agent,
      validation: validation.results,
      review,
      snapshotId: snapshot.snapshotId,
      pending: snapshot.pending,
      change: snapshot.change,
      gates,
      changed: snapshot.changed,
      promiseMissing: promiseFound === false,
      ...recorded,
    };
  } finally {
    watch.dispose();
  }
}

export function describeInterruption(why: Interruption): string {
  switch (why) {
    case "stopped":
      return "stopped by request";
    case "deadline":
      return "the time budget ran out";
    case "shutdown":
      return "handed back: the worker is shutting down";
    case "lease_lost":
      return "lease lost";
    default:
      return assertNever(why);
  }
}

/** `promise`, awaited later: its failure is not an unhandled rejection meanwhile. */
function handledLater<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => {});
  return promise;
}

/** The workspace phase's failure when the workspace leads elsewhere now (workspace-check.ts). */
function movedWorkspace(ctx: RunContext): { phase: string; error: string } | null {
  const error = workspaceMoved(ctx.run.workspace);
  return error === null ? null : { phase: "workspace", error };
}
