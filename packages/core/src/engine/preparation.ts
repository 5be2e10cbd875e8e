import { isPreparationPhase, type PhaseArtifact } from "../domain/artifacts";
import { PATTERNS_FOR_PROMPT } from "../learning/patterns";
import { buildPhasePrompt } from "../pipeline/phase-prompt";
import { runPreparationPhase } from "../pipeline/phase-runner";
import { needsPlanApproval, pauseForApproval } from "./approval";
import { watchInterruptions } from "./interruptions";
import type { EngineResources, StepOptions } from "./resources";
import type { EventSpec, RunContext } from "./run-context";
import { BUDGET_SUMMARY, finished, interruptedStep, type StepResult } from "./step-result";

const ITERATION_PHASES = ["implementation", "validation", "review"];

/**
 * Runs the run's preparation phases (planning, architecture, design — those it lists, in that
 * order) before iteration 1, each once: a phase whose artifact is stored is not run again
 * when the run resumes. Each artifact goes into the prompts of the later phases and of every
 * iteration. A failed phase fails the run (`phase_failed`).
 */
export async function runPreparation(
  res: EngineResources,
  ctx: RunContext,
  opts: StepOptions,
): Promise<StepResult | "continue"> {
  const { spec } = ctx.run;
  const phases = spec.phases.filter(isPreparationPhase);
  if (phases.length === 0) return "continue";
  const [done, learned] = await Promise.all([
    res.store.phaseArtifacts(ctx.run.id),
    res.store.failurePatterns(ctx.run.workspace, PATTERNS_FOR_PROMPT),
  ]);
  const left = () => (ctx.run.deadlineAt ?? Number.POSITIVE_INFINITY) - ctx.now();

  for (const [index, phase] of phases.entries()) {
    if (done.some((a) => a.phase === phase)) continue;
    if (opts.shutdown?.aborted) return { kind: "handed_back" };
    if (ctx.run.status === "stopping" || opts.stop?.aborted) {
      await ctx.finish("stopped", "stopped", "stopped by request");
      return finished(ctx);
    }
    if (left() <= 0) {
      await ctx.finish("failed", "max_minutes", BUDGET_SUMMARY, {
        events: [["budget_exhausted", { reason: "max_minutes" }, "max_minutes"]],
      });
      return finished(ctx);
    }
    await ctx.commit({ progress: `${phase} phase: running the ${spec.agent.type} agent` }, [
      ["phase_started", { phase, agent: spec.agent.type }],
    ]);
    const watch = watchInterruptions(res, ctx, opts);
    try {
      const result = await runPreparationPhase({
        agent: spec.agent,
        phase,
        prompt: buildPhasePrompt(spec, phase, done, learned),
        workspace: ctx.run.workspace,
        env: ctx.commandEnv(0),
        timeoutMs: Math.max(1, left()),
        outputCapBytes: res.outputCapBytes ?? 65_536,
        signal: watch.signal,
        onSpawn: (pgid) => {
          ctx.commit({ activePgid: pgid }).catch((error: unknown) => {
            res.logger.warn(
              { err: error, runId: ctx.run.id },
              "could not record the process group",
            );
          });
        },
        ...(res.llm ? { llm: res.llm } : {}),
        model:
          (spec.agent.type === "mistral" ? spec.agent.model : undefined) ??
          res.defaultModel ??
          "mistral-large-latest",
        onTokens: async (count) => {
          await ctx.commit({
            metrics: { ...ctx.run.metrics, tokens: ctx.run.metrics.tokens + count },
          });
        },
      });
      const why = watch.interruption(left());
      if (why) {
        return await interruptedStep(ctx, why);
      }
      if (!result.ok) {
        const skipped = [
          ...phases.slice(index + 1),
          ...ITERATION_PHASES,
          ...(spec.phases.includes("packaging") ? ["packaging"] : []),
        ];
        await ctx.finish(
          "failed",
          "error",
          `phase_failed: ${phase}: ${result.error}`.slice(0, 2000),
          {
            events: [["phase_failed", { iteration: 0, phase, error: result.error, skipped }]],
          },
        );
        return finished(ctx);
      }
      const artifact: PhaseArtifact = {
        runId: ctx.run.id,
        phase,
        content: result.content,
        createdAt: ctx.now(),
      };
      const completed: EventSpec = [
        "phase_completed",
        { phase, durationMs: result.durationMs, bytes: Buffer.byteLength(result.content) },
      ];
      // `approval: "plan"`: a person approves (or edits) the plan before anything builds on
      // it; the artifact and the pause are one write, so a crash cannot skip the approval.
      if (phase === "planning" && needsPlanApproval(ctx.run)) {
        return await pauseForApproval(
          ctx,
          { kind: "plan", iteration: 0, question: null, plan: artifact.content },
          { events: [completed], writes: { phaseArtifact: artifact } },
        );
      }
      await ctx.commit({ activePgid: null, progress: `${phase} phase done` }, [completed], {
        phaseArtifact: artifact,
      });
      done.push(artifact);
    } finally {
      watch.dispose();
    }
  }
  return "continue";
}
