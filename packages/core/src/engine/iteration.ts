import { hasCompletionPromise } from "../agents/command-agent";
import { buildPrompt } from "../agents/prompt";
import type { AgentResult, IterationRecord, ValidationResult } from "../domain/run";
import { buildCommandEnv } from "../process/command-env";
import { assertNever } from "../util/assert-never";
import { runValidation, validationFeedback } from "../validation/validation-runner";
import { decideIteration, type IterationDecision } from "./decide";
import type { EngineResources, StepOptions } from "./resources";
import type { RunContext } from "./run-context";
import { runAgentPhase } from "./agent-phase";
import { type Interruption, watchInterruptions } from "./interruptions";

export type IterationResult =
  | { kind: "decided"; decision: IterationDecision; agent: AgentResult; validation: ValidationResult[] }
  | { kind: "phase_failed"; phase: string; error: string; agent: AgentResult; validation: ValidationResult[] }
  | { kind: "interrupted"; why: Interruption; agent: AgentResult | null; validation: ValidationResult[] };

/** Runs the agent, then the validation commands, and decides; writes as it goes. */
export async function runIteration(
  res: EngineResources,
  ctx: RunContext,
  n: number,
  attempt: number,
  opts: StepOptions,
): Promise<IterationResult> {
  const { spec } = ctx.run;
  const [history, failures] = await Promise.all([
    res.store.sessionHistory(ctx.run.sessionId, ctx.run.id, 10),
    res.store.toolFailures(ctx.run.id, 20),
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
    }),
    agent: null,
    validation: [],
    reviewId: null,
    feedback: null,
    startedAt,
    finishedAt: null,
  };
  const agentLabel =
    spec.agent.type === "command" ? spec.agent.command : `mistral ${spec.agent.model ?? res.defaultModel ?? ""}`.trim();
  await ctx.commit(
    { iteration: n, progress: `iteration ${n}/${spec.maxIterations}: running agent: ${agentLabel}` },
    [
      ["iteration_started", { iteration: n, attempt }],
      ["agent_started", { iteration: n, type: spec.agent.type, agent: agentLabel }],
    ],
    { insertIteration: record },
  );
  ctx.lastIteration = record;

  const watch = watchInterruptions(res, ctx, opts);
  try {
    const env = buildCommandEnv(res.commandEnv, res.envAllowlist, {
      LOOPRUN_RUN_ID: ctx.run.id,
      LOOPRUN_SESSION_ID: ctx.run.sessionId,
      LOOPRUN_ITERATION: String(n),
      LOOPRUN_WORKSPACE: ctx.run.workspace,
    });
    const outputCapBytes = res.outputCapBytes ?? 65_536;
    const left = () => (ctx.run.deadlineAt ?? Number.POSITIVE_INFINITY) - ctx.now();

    // The process group of the command in flight is recorded, so that whoever resumes the
    // run after a crash of this worker can kill what it left behind.
    const onSpawn = (pgid: number) => {
      ctx.commit({ activePgid: pgid }).catch((error: unknown) => {
        res.logger.warn({ err: error, runId: ctx.run.id }, "could not record the process group");
      });
    };
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
    if (afterAgent) return { kind: "interrupted", why: afterAgent, agent, validation: [] };
    if (result.phaseFailed) return { kind: "phase_failed", ...result.phaseFailed, agent, validation: [] };

    const total = spec.validationCommands.length;
    await ctx.commit(
      {
        activePgid: null,
        progress:
          total > 0
            ? `iteration ${n}/${spec.maxIterations}: agent exited ${agent.exitCode}, validating`
            : `iteration ${n}/${spec.maxIterations}: agent exited ${agent.exitCode}`,
      },
      [["agent_finished", { iteration: n, exitCode: agent.exitCode, durationMs: agent.durationMs }]],
      ctx.updateIteration({ agent }),
    );

    const validation = await runValidation({
      commands: spec.validationCommands,
      workspace: ctx.run.workspace,
      env,
      timeoutMs: spec.validationTimeoutMs,
      deadlineMs: Math.max(1, left()),
      outputCapBytes,
      signal: watch.signal,
      onSpawn,
      onCommandStart: async (index, command) => {
        await ctx.commit({
          progress: `iteration ${n}/${spec.maxIterations}: running validation ${index + 1}/${total}: ${command}`,
        });
      },
    });
    const afterValidation = watch.interruption(left());
    if (afterValidation || validation.interrupted) {
      const why = afterValidation ?? (validation.interrupted === "deadline" ? "deadline" : "stopped");
      return { kind: "interrupted", why, agent, validation: validation.results };
    }

    const decision = decideIteration({
      agentExitCode: agent.exitCode,
      agentOutput: agent.output,
      validationPassed: validation.passed,
      validationFeedback: validationFeedback(validation.results),
      promiseFound:
        spec.completionPromise === null
          ? null
          : hasCompletionPromise(agent.output, spec.completionPromise),
      completionPromise: spec.completionPromise,
      consecutiveFailures: ctx.run.consecutiveFailures,
    });
    return { kind: "decided", decision, agent, validation: validation.results };
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
