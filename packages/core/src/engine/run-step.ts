import { mkdir } from "node:fs/promises";
import { resolve } from "node:path";
import { checkBudget, deadlineFor } from "../budget/budget";
import { abandonedAgent, abandonedAgentFinished } from "../domain/events";
import type { BudgetReason, RunRecord } from "../domain/run";
import { isTerminal } from "../domain/run";
import { killOrphanedGroup } from "../process/orphans";
import { LeaseLostError, messageOf } from "../util/errors";
import { errorFields } from "../util/redactor";
import { planApprovalStep } from "./approval";
import { runIteration } from "./iteration";
import { runPreparation } from "./preparation";
import { recordIteration } from "./record-iteration";
import type { EngineResources, StepOptions } from "./resources";
import { type EventSpec, mutationOf, RunContext } from "./run-context";
import type { ClaimStart, RunPatch } from "./run-store";
import { backfillSnapshot, ensureBaseline } from "./snapshot-step";
import { BUDGET_SUMMARY, finished, type StepResult } from "./step-result";
import { workspaceMoved } from "./workspace-check";

export type { StepResult } from "./step-result";

/** An iteration interrupted this many times (crashes, hand-backs) fails the run: a poison run. */
export const MAX_ITERATION_ATTEMPTS = 3;

/** How soon a run whose workspace a rollback holds looks again. */
const HOLD_RECHECK_MS = 500;

/** How soon a step that found the database unreachable tries again. */
export const STORE_RETRY_MS = 2000;

/**
 * Drives a run as far as it can go without waiting: claims it, runs iterations until one
 * ends the run or asks for a cooldown (the caller then parks the job until `until`).
 */
export async function runStep(
  res: EngineResources,
  runId: string,
  opts: StepOptions = {},
): Promise<StepResult> {
  let claimed: Awaited<ReturnType<typeof res.store.claimRun>>;
  try {
    claimed = await res.store.claimRun(runId, firstStart(res));
  } catch (error) {
    if (!res.store.isUnavailable?.(error)) throw error;
    return storeUnavailable(res, runId, failureOf(error));
  }
  if (claimed === null) return { kind: "missing" };
  const { run } = claimed;
  if (isTerminal(run.status)) return { kind: "finished", status: run.status, reason: run.reason };
  const ctx = new RunContext(res, run, run.epoch, claimed.lastIteration, claimed.lastDecided);
  try {
    return await stepOnce(res, ctx, opts, claimed.started);
  } finally {
    ctx.dispose();
    await ctx.releasePromptFile().catch(() => {});
  }
}

async function stepOnce(
  res: EngineResources,
  ctx: RunContext,
  opts: StepOptions,
  firstStep: boolean,
): Promise<StepResult> {
  try {
    const result = await drive(res, ctx, opts, firstStep);
    // Rows still being computed when the step ended (it handed the run back) go in now.
    if (ctx.hasDeferred) await ctx.commit({});
    return result;
  } catch (error) {
    if (error instanceof LeaseLostError) return { kind: "lease_lost" };
    if (res.store.isUnavailable?.(error)) return putOff(res, ctx, opts, error);
    const reported = withoutQuery(error);
    const message = messageOf(reported);
    // Redacted with the step's own secrets too (the workers' logger knows only theirs).
    const err = ctx.redact(reported instanceof Error ? errorFields(reported) : message);
    res.logger.error({ err, runId: ctx.run.id }, "run step failed");
    try {
      await ctx.finish("failed", "error", ctx.redact(`error: ${message}`).slice(0, 2000), {
        iteration: { status: "failed", outcome: "error" },
      });
    } catch (finishError) {
      if (finishError instanceof LeaseLostError) return { kind: "lease_lost" };
      if (res.store.isUnavailable?.(finishError)) return putOff(res, ctx, opts, finishError);
      throw finishError;
    }
    return { kind: "finished", status: "failed", reason: "error" };
  }
}

/**
 * The database failed the step for now (a restart, a cut connection, a deadlock): the run is
 * not failed for it. What the step started is killed, and the run is left as it is stored —
 * its iteration in flight, if any, `running` — for a later step, which takes it up as it takes
 * up the iteration of a crashed worker (another attempt).
 */
function putOff(
  res: EngineResources,
  ctx: RunContext,
  opts: StepOptions,
  error: unknown,
): StepResult {
  // A step that lost the run already kills nothing: what carries the run's id on this host may
  // be the newer step's.
  if (opts.leaseLost?.aborted) return { kind: "lease_lost" };
  killOrphanedGroup(ctx.run.activePgid, ctx.run.id);
  return storeUnavailable(res, ctx.run.id, ctx.redact(failureOf(error)));
}

function storeUnavailable(res: EngineResources, runId: string, why: string): StepResult {
  res.logger.warn({ runId, err: why }, "database unavailable: step put off");
  return { kind: "store_unavailable", until: (res.now ?? Date.now)() + STORE_RETRY_MS };
}

/**
 * The error to report. A failed query's error (drizzle's) carries the query and its parameters
 * (the run's own data) in its message and stack: its cause says why without them.
 */
function withoutQuery(error: unknown): unknown {
  const { cause } = (error ?? {}) as { cause?: unknown };
  return error instanceof Error && "query" in error && cause instanceof Error ? cause : error;
}

const failureOf = (error: unknown) => messageOf(withoutQuery(error));

async function drive(
  res: EngineResources,
  ctx: RunContext,
  opts: StepOptions,
  firstStep: boolean,
): Promise<StepResult> {
  if (ctx.run.status === "stopping") {
    // The attempt in flight was its worker's, which is gone: abandoned, and the run stopped.
    await ctx.finish("stopped", "stopped", "stopped by request", {
      iteration: { status: "abandoned", outcome: "stopped" },
    });
    return finished(ctx);
  }
  // A job of a run that waits for a person (a stale one: waiting ends the job): nothing to do.
  if (ctx.run.status === "awaiting_approval") return { kind: "awaiting_approval" };
  // A rollback is restoring the workspace: the run starts once it is done (checked again soon).
  if (ctx.run.status === "queued") {
    const now = ctx.now();
    const heldUntil = await res.store.workspaceHeldUntil(ctx.run, now);
    if (heldUntil !== null) {
      await ctx.commit({ progress: "waiting: a rollback is restoring the workspace" });
      return { kind: "cooldown", until: Math.min(heldUntil, now + HOLD_RECHECK_MS) };
    }
  }
  await start(res, ctx, firstStep);
  // The API resolved and checked the workspace; it is created where the run runs.
  const workspaceError = await ensureWorkspace(ctx);
  const snapshotError = workspaceError === null ? await ensureBaseline(res, ctx) : null;
  const prepared = workspaceError ?? snapshotError;
  if (prepared !== null) {
    return failBeforeIteration(ctx, workspaceError !== null ? "workspace" : "snapshot", prepared);
  }
  try {
    await backfillSnapshot(res, ctx);
  } catch (error) {
    if (error instanceof LeaseLostError) throw error;
    res.logger.warn({ err: error, runId: ctx.run.id }, "could not write a missing snapshot's rows");
  }
  // Preparation phases run before iteration 1 only: once an iteration started, they are done.
  if (ctx.lastIteration === null) {
    const prepared = await runPreparation(res, ctx, opts);
    if (prepared !== "continue") return prepared;
    const approval = await planApprovalStep(res, ctx, opts);
    if (approval !== "continue") return approval;
  }

  for (;;) {
    const budget = checkBudget(ctx.run, ctx.now());
    if (budget.kind === "exhausted") {
      await finishBudget(ctx, budget.reason);
      return finished(ctx);
    }
    // A worker that is shutting down starts nothing new: the job goes back to the queue.
    if (opts.shutdown?.aborted) return { kind: "handed_back" };
    // Nor one whose job lock was lost (another worker may have the run by now).
    if (opts.leaseLost?.aborted) return { kind: "lease_lost" };
    // Every write returns the row as stored, so a stop request shows in ctx.run.
    if (stopRequested(ctx) || opts.stop?.aborted) {
      await ctx.finish("stopped", "stopped", "stopped by request");
      return finished(ctx);
    }
    // The previous iteration (in this step: no cooldown between them) may have moved it.
    const moved = workspaceMoved(ctx.run.workspace);
    if (moved !== null) return failBeforeIteration(ctx, "workspace", moved);
    const last = ctx.lastIteration;
    const resume = last?.status === "abandoned";
    if (resume && last.attempt >= MAX_ITERATION_ATTEMPTS) {
      await ctx.finish(
        "failed",
        "error",
        `error: iteration ${last.n} was interrupted ${last.attempt} times (its worker keeps dying or being stopped)`,
      );
      return finished(ctx);
    }
    const n = last === null ? 1 : resume ? last.n : last.n + 1;
    const attempt = resume ? last.attempt + 1 : 1;
    const result = await runIteration(res, ctx, n, attempt, opts);
    const next = await recordIteration(ctx, result);
    if (result.kind === "decided") opts.onProgress?.();
    if (next !== "continue") return next;
  }
}

/** Creates the run's workspace unless it exists; returns the error when it cannot. */
async function ensureWorkspace(ctx: RunContext): Promise<string | null> {
  const moved = workspaceMoved(ctx.run.workspace);
  if (moved !== null) return moved;
  try {
    await mkdir(resolve(ctx.run.workspace), { recursive: true });
    return null;
  } catch (error) {
    return `could not create the workspace ${ctx.run.workspace}: ${messageOf(error)}`;
  }
}

/**
 * A run's first start, written by its claim (see ClaimStart) unless a rollback holds the
 * workspace: the run is then claimed again once the hold ends.
 */
function firstStart(res: EngineResources): ClaimStart {
  const now = (res.now ?? Date.now)();
  return {
    now,
    mutation: (run) => {
      const started = startOf(run, now);
      return mutationOf(res, run, started.patch, started.events, {}, now);
    },
  };
}

/** What starting a run writes: running from `now`, its deadline, `run_started`. */
function startOf(run: RunRecord, now: number): { patch: RunPatch; events: EventSpec[] } {
  return {
    patch: {
      status: "running",
      startedAt: now,
      deadlineAt: deadlineFor(now, run.spec.maxMinutes),
      progress: "started",
    },
    events: [["run_started", { workspace: run.workspace }]],
  };
}

/** Marks the run resumed (after a person's answer, or an interrupted iteration). */
async function start(res: EngineResources, ctx: RunContext, firstStep: boolean): Promise<void> {
  const now = ctx.now();
  // Its claim did not start it (a rollback held the workspace, and let go since): it starts
  // here, as the claim would have started it.
  const { patch, events } =
    ctx.run.status === "queued" && ctx.run.startedAt === null
      ? startOf(ctx.run, now)
      : { patch: {} as RunPatch, events: [] as EventSpec[] };
  if (ctx.run.status === "queued" && ctx.run.startedAt !== null) {
    // Queued again by a person's approval or reply: the run goes on where it paused.
    patch.status = "running";
    patch.progress = "resumed after a person's answer";
  }
  // A worker that died mid-command may have left its process group running (same host),
  // recorded or not (it may have died before it recorded the group). Not when this step
  // started the run: nothing ran before it, and the search reads every process's environment.
  // Nor after a step that ended as steps do (its iteration recorded, no command in flight: a
  // cooldown's end): what its commands left outside their groups (`setsid`, a server for the
  // tests) lives until the run ends, which kills it.
  const last = ctx.lastIteration;
  // A handed-back attempt too: it runs again, and nothing of the last one must run beside it.
  const cutShort =
    ctx.run.activePgid !== null ||
    last === null ||
    last.status === "running" ||
    last.status === "abandoned";
  if (ctx.run.status !== "queued" && !firstStep && cutShort) {
    if (killOrphanedGroup(ctx.run.activePgid, ctx.run.id)) {
      res.logger.warn(
        { runId: ctx.run.id, pgid: ctx.run.activePgid },
        "killed processes left by a crashed worker",
      );
    }
    if (ctx.run.activePgid !== null) patch.activePgid = null;
  }
  let iteration = {};
  if (last?.status === "running") {
    // Its worker died or lost the run mid-iteration: the attempt ended in an error. Its agent,
    // when that was what ran, is given a result (killed) and its `agent_finished` (both written
    // with the agent's end, which the attempt lacks).
    const agent = abandonedAgent(last, now);
    iteration = ctx.updateIteration({
      status: "abandoned",
      outcome: "error",
      finishedAt: now,
      ...(agent ? { agent } : {}),
    });
    if (agent) events.push(["agent_finished", abandonedAgentFinished(last.n, agent)]);
  }
  if (last !== null && (last.status === "running" || last.status === "abandoned")) {
    events.push(["run_resumed", { iteration: last.n, abandonedAttempt: last.attempt }]);
    patch.progress = `resuming iteration ${last.n}`;
  } else if (last === null && ctx.run.status === "running" && !firstStep) {
    // Started by an earlier step that ended before iteration 1 (a crash or a hand-back during
    // a preparation phase): the phase without its artifact runs again.
    events.push(["run_resumed", { iteration: 0 }]);
    patch.progress = "resuming before iteration 1";
  }
  if (events.length > 0 || Object.keys(patch).length > 0)
    await ctx.commit(patch, events, iteration);
}

async function finishBudget(ctx: RunContext, reason: BudgetReason): Promise<void> {
  await ctx.finish("failed", reason, BUDGET_SUMMARY, {
    events: [["budget_exhausted", { reason }, reason]],
    iteration: { status: "failed", outcome: "budget_exhausted" },
  });
}

// A function, so that TypeScript does not keep an earlier narrowing of the mutable status.
function stopRequested(ctx: RunContext): boolean {
  return ctx.run.status === "stopping";
}

/**
 * Fails the run at what comes before an iteration (the workspace, the baseline snapshot): told
 * as `iteration: 0`, every phase of the pipeline skipped.
 */
async function failBeforeIteration(
  ctx: RunContext,
  phase: "workspace" | "snapshot",
  error: string,
): Promise<StepResult> {
  const { phases } = ctx.run.spec;
  await ctx.finish("failed", "error", `phase_failed: ${phase}: ${error}`.slice(0, 2000), {
    events: [
      [
        "phase_failed",
        {
          iteration: 0,
          phase,
          error,
          skipped: [
            ...phases.filter((p) => p !== "packaging"),
            "implementation",
            "validation",
            "review",
            ...phases.filter((p) => p === "packaging"),
          ],
        },
      ],
    ],
  });
  return finished(ctx);
}
