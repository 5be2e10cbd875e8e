import { checkBudget } from "../budget/budget";
import type { RunReason } from "../domain/run";
import { killRunOrphans } from "../process/orphans";
import { assertNever } from "../util/assert-never";
import { awaitReply } from "./approval";
import { packagingWrites, partialWrites, reviewWrites, stallWrites } from "./decided-writes";
import { describeInterruption, type IterationResult } from "./iteration";
import type { EventSpec, RunContext } from "./run-context";
import type { RunPatch } from "./run-store";
import { BUDGET_SUMMARY, finished, type StepResult } from "./step-result";
import { validationEvents as validationEventsOf, validationFailed } from "./validation-events";

/** Writes an iteration's result and says what comes next. */
export async function recordIteration(
  ctx: RunContext,
  result: IterationResult,
): Promise<StepResult | "continue"> {
  const now = ctx.now();
  const { spec } = ctx.run;
  const { gates } = result;
  // A validation a stop or the deadline killed did not fail: not counted (its event says the
  // command was killed: exit code null).
  const cut = result.kind === "interrupted" && result.validationCut === true;
  const metrics = {
    ...ctx.run.metrics,
    iterations: ctx.run.metrics.iterations + 1,
    validationFailures:
      ctx.run.metrics.validationFailures +
      (!cut && validationFailed(result.validation, gates) ? 1 : 0),
  };
  const n = ctx.lastIteration?.n ?? 0;
  // Written when the review started already (see runIteration), when one did.
  const validationEvents: EventSpec[] = result.validationRecorded
    ? []
    : validationEventsOf(n, result.validation, gates);

  if (result.kind === "interrupted") {
    const { why } = result;
    // A killed agent ended too: its event says so (exit code null), as a killed command's does.
    const agentEvents = agentEnd(result, n);
    switch (why) {
      case "lease_lost":
        return { kind: "lease_lost" };
      case "shutdown":
        await ctx.commit(
          { progress: describeInterruption(why), activePgid: null },
          agentEvents,
          ctx.updateIteration({
            status: "abandoned",
            // The worker stopped it (shutting down); another runs the iteration again.
            outcome: "stopped",
            finishedAt: now,
            // What the agent did before the hand-back killed it: the attempt's record keeps it.
            ...(result.agent ? { agent: result.agent } : {}),
          }),
        );
        // The attempt runs again elsewhere: what it left outside its process group (setsid)
        // must not run beside the next one, nor outlive this worker.
        killRunOrphans(ctx.run);
        return { kind: "handed_back" };
      case "stopped":
        await ctx.finish("stopped", "stopped", describeInterruption(why), {
          patch: { metrics },
          events: [...agentEvents, ...validationEvents],
          iteration: {
            status: "failed",
            outcome: "stopped",
            validation: result.validation,
            ...(result.agent ? { agent: result.agent } : {}),
          },
        });
        return finished(ctx);
      case "deadline":
        await ctx.finish("failed", "max_minutes", BUDGET_SUMMARY, {
          patch: { metrics },
          events: [
            ...agentEvents,
            ...validationEvents,
            ["budget_exhausted", { reason: "max_minutes" }, "max_minutes"],
          ],
          iteration: {
            status: "failed",
            outcome: "budget_exhausted",
            validation: result.validation,
            ...(result.agent ? { agent: result.agent } : {}),
          },
        });
        return finished(ctx);
      default:
        return assertNever(why);
    }
  }

  if (result.kind === "phase_failed") {
    // Never read as success: the remaining phases are skipped and the run fails.
    const skipped = [
      ...result.skipped,
      ...(spec.phases.includes("packaging") ? ["packaging"] : []),
    ];
    await ctx.finish(
      "failed",
      "error",
      `phase_failed: ${result.phase}: ${result.error}`.slice(0, 2000),
      {
        patch: { metrics, ...(result.snapshot ? { latestSnapshot: result.snapshot } : {}) },
        events: [
          // An agent whose phase failed (its plan, its LLM) ended too.
          ...agentEnd(result, n),
          ...validationEvents,
          ["phase_failed", { iteration: n, phase: result.phase, error: result.error, skipped }],
        ],
        iteration: {
          status: "failed",
          outcome: "error",
          agent: result.agent,
          validation: result.validation,
        },
      },
    );
    return finished(ctx);
  }

  const { decision, review } = result;
  // Redacted here, not only as it is written: the next prompt is made from it as it is kept in
  // memory, and must be what is stored (a reviewer's issue, a blocked agent's question, may
  // repeat a secret).
  const feedback = decision.kind === "complete" ? null : ctx.redact(decision.feedback);
  const iterationPatch = {
    status: decision.status,
    outcome: decision.outcome,
    validation: result.validation,
    feedback,
    finishedAt: now,
    ...(review ? { reviewId: review.artifact.id } : {}),
  };
  const reviewed = reviewWrites(n, review);
  // The snapshot's rows, when not stored yet: written with the write that ends the run or the
  // step — or later, when the next iteration starts at once (see RunContext.deferSnapshot).
  if (result.pending !== null) ctx.deferSnapshot(result.pending);
  const { writes } = reviewed;
  const decided: RunPatch = { ...reviewed.patch, latestSnapshot: result.snapshotId };
  metrics.reviewBlockings += reviewed.blocking ? 1 : 0;
  // The promise gate's own event: without it, an iteration whose commands passed would be
  // retried with no event saying why (the review does not run after a missing promise).
  const promiseEvents: EventSpec[] = result.promiseMissing
    ? [["promise_missing", { iteration: n, completionPromise: spec.completionPromise }]]
    : [];
  const gateEvents = [...validationEvents, ...promiseEvents, ...reviewed.events];
  // A stop that came in before this decision ends the run stopped, not as decided (one that
  // comes while the decision is written loses to it). What the iteration did is kept: its
  // gates' events, its review, its snapshot.
  const stoppedMeanwhile = async (): Promise<StepResult | null> => {
    if (!(await ctx.stopRequestedNow())) return null;
    await ctx.finish("stopped", "stopped", describeInterruption("stopped"), {
      patch: { metrics, ...decided },
      events: gateEvents,
      iteration: { ...iterationPatch, status: "failed", outcome: "stopped", feedback: null },
      writes,
    });
    return finished(ctx);
  };
  switch (decision.kind) {
    case "complete": {
      const stopped = await stoppedMeanwhile();
      if (stopped) return stopped;
      const partial = partialWrites(result.gates);
      const summary = `succeeded after ${metrics.iterations} iteration${metrics.iterations === 1 ? "" : "s"}${partial.summary}`;
      // The snapshot rows go with the run's end; packaging needs the run's change.
      const rows = await ctx.takeDeferredRows();
      const change = rows.change ?? result.change;
      if (!change) throw new Error("the run's change was not computed");
      const packaged = packagingWrites(ctx, change, now);
      await ctx.finish("succeeded", "success", summary, {
        patch: {
          metrics,
          consecutiveFailures: 0,
          stalledIterations: 0,
          ...partial.patch,
          ...decided,
        },
        events: [...gateEvents, ...packaged.events],
        iteration: iterationPatch,
        writes: { ...rows, ...writes, ...packaged.writes },
      });
      return finished(ctx);
    }
    case "fail": {
      const stopped = await stoppedMeanwhile();
      if (stopped) return stopped;
      await ctx.finish(
        "failed",
        decision.reason,
        `${decision.consecutiveFailures} consecutive iterations whose agent failed`,
        {
          patch: {
            metrics,
            consecutiveFailures: decision.consecutiveFailures,
            activePgid: null,
            ...decided,
          },
          events: gateEvents,
          iteration: iterationPatch,
          writes,
        },
      );
      return finished(ctx);
    }
    case "retry": {
      const stall = stallWrites(ctx, result, decision.outcome);
      const patch: RunPatch = {
        metrics,
        consecutiveFailures: decision.consecutiveFailures,
        activePgid: null,
        ...stall.patch,
        ...decided,
      };
      // The run ends here after all: the snapshot's rows go with its end.
      const end = async (reason: RunReason, summary: string, events: EventSpec[]) => {
        const stopped = await stoppedMeanwhile();
        if (stopped) return stopped;
        await ctx.finish("failed", reason, summary, {
          patch,
          events,
          iteration: iterationPatch,
          writes,
        });
        return finished(ctx);
      };
      // A budget that leaves no further iteration ends the run by budget, even when this
      // iteration also stalled it.
      const until = now + spec.cooldownMs;
      const budget = checkBudget({ ...ctx.run, metrics }, until);
      if (budget.kind === "exhausted") {
        return end(budget.reason, BUDGET_SUMMARY, [
          ...gateEvents,
          ["budget_exhausted", { reason: budget.reason }, budget.reason],
        ]);
      }
      if (stall.stalled) return end("stalled", stall.summary, gateEvents);
      const iteration = { ...writes, ...ctx.updateIteration(iterationPatch) };
      ctx.lastDecided = ctx.lastIteration;
      if (spec.cooldownMs === 0) {
        // The snapshot's diffs (a git process) are computed beside a later iteration, and
        // written then (see RunContext.deferSnapshot).
        await ctx.commit(patch, gateEvents, iteration, { keepDeferred: true });
        return "continue";
      }
      await ctx.commit(
        {
          ...patch,
          progress: `cooling down ${spec.cooldownMs} ms before iteration ${n + 1}/${spec.maxIterations}`,
        },
        [
          ...gateEvents,
          [
            "cooldown_started",
            { iteration: n, cooldownMs: spec.cooldownMs, until: new Date(until).toISOString() },
          ],
        ],
        iteration,
      );
      return { kind: "cooldown", until };
    }
    case "await_reply":
      return awaitReply(ctx, decision, {
        n,
        metrics,
        patch: { consecutiveFailures: decision.consecutiveFailures, ...decided },
        events: gateEvents,
        iteration: iterationPatch,
        writes,
      });
    default:
      return assertNever(decision);
  }
}

/** The agent's `agent_finished`, when the iteration ended before it was written. */
function agentEnd(result: IterationResult, n: number): EventSpec[] {
  if (result.kind === "decided" || !result.agentUnrecorded || result.agent === null) return [];
  const { exitCode, durationMs } = result.agent;
  return [["agent_finished", { iteration: n, exitCode, durationMs }]];
}
