import { makeAgentPlan } from "../agents/mistral-agent-plan";
import { renderPlan } from "../agents/plan";
import { buildPrompt } from "../agents/prompt";
import { checkBudget } from "../budget/budget";
import type { ApprovalRequest } from "../domain/approval";
import type { RunMetrics, RunRecord } from "../domain/run";
import { PATTERNS_FOR_PROMPT } from "../learning/patterns";
import { timeoutSignal } from "../util/timeout-signal";
import { waitingProgress } from "./approval-transitions";
import type { IterationDecision } from "./decide";
import { watchInterruptions } from "./interruptions";
import type { EngineResources, StepOptions } from "./resources";
import type { EventSpec, RunContext } from "./run-context";
import type { IterationPatch, MutationExtras, RunPatch } from "./run-store";
import { BUDGET_SUMMARY, finished, interruptedStep, type StepResult } from "./step-result";

/** The run asked for plan approval and no person has approved its plan yet. */
export function needsPlanApproval(run: RunRecord): boolean {
  if (run.spec.approval !== "plan") return false;
  return !(run.approval?.kind === "plan" && run.approval.resolvedAt !== null);
}

interface Writes {
  patch?: RunPatch;
  events?: EventSpec[];
  writes?: MutationExtras;
}

/**
 * Puts the run in `awaiting_approval`: the step ends and the worker frees its slot; a person's
 * approve or reply queues it again. A stop requested meanwhile ends it instead.
 */
export async function pauseForApproval(
  ctx: RunContext,
  request: Pick<ApprovalRequest, "kind" | "iteration" | "question" | "plan">,
  extra: Writes = {},
): Promise<StepResult> {
  const approval: ApprovalRequest = { ...request, requestedAt: ctx.now(), resolvedAt: null };
  await ctx.commit(
    {
      ...extra.patch,
      status: "awaiting_approval",
      approval,
      activePgid: null,
      progress: waitingProgress(request.kind, request.question),
    },
    [...(extra.events ?? []), ["approval_requested", { ...request }]],
    extra.writes ?? {},
  );
  if (ctx.run.status === "stopping") {
    await ctx.finish("stopped", "stopped", "stopped by request");
    return finished(ctx);
  }
  return { kind: "awaiting_approval" };
}

/**
 * Before iteration 1 of a run with `approval: "plan"` and the mistral agent's own plan: makes
 * the plan (`plan_created`, stored on the run) and waits for a person. A run with the
 * `planning` phase waits after that phase instead (see `preparation.ts`).
 */
export async function planApprovalStep(
  res: EngineResources,
  ctx: RunContext,
  opts: StepOptions,
): Promise<StepResult | "continue"> {
  const { spec } = ctx.run;
  const agent = spec.agent;
  if (!needsPlanApproval(ctx.run) || spec.phases.includes("planning")) return "continue";
  if (agent.type !== "mistral") return "continue";
  let plan = ctx.run.plan;
  if (plan === null) {
    if (opts.shutdown?.aborted) return { kind: "handed_back" };
    if (ctx.run.status === "stopping" || opts.stop?.aborted) {
      await ctx.finish("stopped", "stopped", "stopped by request");
      return finished(ctx);
    }
    if (!res.llm)
      return failPlanning(ctx, "no LLM is configured: set MISTRAL_API_KEY for the workers");
    const [history, toolFailures, phaseArtifacts, learned] = await Promise.all([
      ctx.sessionHistory(),
      ctx.toolFailures(),
      spec.phases.length > 0 ? res.store.phaseArtifacts(ctx.run.id) : [],
      res.store.failurePatterns(ctx.run.workspace, PATTERNS_FOR_PROMPT),
    ]);
    const prompt = buildPrompt({
      spec,
      iteration: 1,
      feedback: null,
      history,
      toolFailures,
      phaseArtifacts,
      learned,
    });
    await ctx.commit({ progress: "planning: the mistral agent makes its plan for approval" });
    const left = () => (ctx.run.deadlineAt ?? Number.POSITIVE_INFINITY) - ctx.now();
    const watch = watchInterruptions(res, ctx, opts);
    const timed = timeoutSignal(watch.signal, Math.max(1, left()));
    try {
      const made = await makeAgentPlan({
        llm: res.llm,
        model: agent.model ?? res.defaultModel ?? "mistral-large-latest",
        ...(agent.temperature !== undefined ? { temperature: agent.temperature } : {}),
        prompt,
        signal: timed.signal,
        onTokens: async (count) => {
          await ctx.commit({
            metrics: { ...ctx.run.metrics, tokens: ctx.run.metrics.tokens + count },
          });
        },
      });
      const why = watch.interruption(left());
      if (why) return await interruptedStep(ctx, why);
      if (!made.ok) return await failPlanning(ctx, made.error);
      plan = made.plan;
      await ctx.commit({ plan }, [
        ["plan_created", { iteration: 0, version: plan.version, steps: plan.steps.length, plan }],
      ]);
    } finally {
      timed.clear();
      watch.dispose();
    }
  }
  return pauseForApproval(ctx, {
    kind: "plan",
    iteration: 0,
    question: null,
    plan: renderPlan(plan),
  });
}

/**
 * An iteration whose agent reported `blocked` with a question: recorded as decided (outcome:
 * the gate that failed), then the run waits for a person's reply — unless its budget is spent
 * anyway.
 */
export async function awaitReply(
  ctx: RunContext,
  decision: Extract<IterationDecision, { kind: "await_reply" }>,
  input: {
    n: number;
    metrics: RunMetrics;
    patch: RunPatch;
    events: EventSpec[];
    iteration: IterationPatch;
    writes: MutationExtras;
  },
): Promise<StepResult> {
  // A person's reply is new input: the stall count starts over (the iteration after the
  // reply is compared with this one, which failed its gates like the ones before it).
  const patch: RunPatch = {
    ...input.patch,
    metrics: input.metrics,
    activePgid: null,
    stalledIterations: 0,
  };
  const budget = checkBudget({ ...ctx.run, metrics: input.metrics }, ctx.now());
  if (budget.kind === "exhausted") {
    await ctx.finish("failed", budget.reason, BUDGET_SUMMARY, {
      patch,
      events: [...input.events, ["budget_exhausted", { reason: budget.reason }, budget.reason]],
      iteration: input.iteration,
      writes: input.writes,
    });
    return finished(ctx);
  }
  const writes = { ...input.writes, ...ctx.updateIteration(input.iteration) };
  ctx.lastDecided = ctx.lastIteration;
  return pauseForApproval(
    ctx,
    { kind: "question", iteration: input.n, question: decision.question, plan: null },
    { patch, events: input.events, writes },
  );
}

async function failPlanning(ctx: RunContext, error: string): Promise<StepResult> {
  await ctx.finish("failed", "error", `phase_failed: planning: ${error}`.slice(0, 2000), {
    events: [
      [
        "phase_failed",
        {
          iteration: 0,
          phase: "planning",
          error,
          skipped: ["implementation", "validation", "review"],
        },
      ],
    ],
  });
  return finished(ctx);
}
