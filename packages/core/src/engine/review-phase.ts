import { ulid } from "ulid";
import { tokensLeft } from "../budget/budget";
import type { ReviewArtifact } from "../domain/artifacts";
import type { ValidationResult } from "../domain/run";
import { runCommandReview } from "../review/command-reviewer";
import { TokenBudgetSpent } from "../review/llm-ask";
import { runMistralReview } from "../review/mistral-reviewer";
import type { ReviewOutcome } from "../review/review-findings";
import type { ReviewInput } from "../review/review-input";
import { runTriangularReview } from "../review/triangular-reviewer";
import { assertNever } from "../util/assert-never";
import { timeoutSignal } from "../util/timeout-signal";
import type { EngineResources } from "./resources";
import type { EventSpec, RunContext } from "./run-context";

export interface ReviewPhaseInput {
  n: number;
  /** The run's change so far (baseline → this iteration's snapshot). */
  diff: string;
  validation: ValidationResult[];
  /** The validation's event, written as the review starts. */
  validationEvents: EventSpec[];
  env: Record<string, string>;
  /** Time left before the run's deadline. */
  msLeft: () => number;
  signal: AbortSignal;
  onSpawn?: (pgid: number) => void;
}

export type ReviewPhaseResult =
  | { ok: true; artifact: ReviewArtifact; notes: string | null }
  /** `budgetSpent`: the run's tokens ran out between two of an LLM review's calls. */
  | { ok: false; error: string; budgetSpent?: true };

/** Runs the run's reviewer on the iteration and makes its ReviewArtifact (not yet stored). */
export async function runReviewPhase(
  res: EngineResources,
  ctx: RunContext,
  input: ReviewPhaseInput,
): Promise<ReviewPhaseResult> {
  const { spec } = ctx.run;
  const review = spec.review;
  await ctx.commit(
    {
      progress: `iteration ${input.n}/${spec.maxIterations}: reviewing the change (${review.type})`,
    },
    input.validationEvents,
    ctx.updateIteration({ validation: input.validation }),
  );
  const reviewInput: ReviewInput = {
    task: spec.task,
    requirements: spec.requirements,
    iteration: input.n,
    diff: input.diff,
    validation: input.validation,
  };
  let outcome: ReviewOutcome;
  switch (review.type) {
    case "none":
      return { ok: false, error: "no reviewer is configured" };
    case "command":
      outcome = await runCommandReview({
        spec: review,
        review: reviewInput,
        workspace: ctx.run.workspace,
        env: input.env,
        timeoutMs: Math.max(1, input.msLeft()),
        signal: input.signal,
        ...(input.onSpawn ? { onSpawn: input.onSpawn } : {}),
      });
      break;
    case "mistral":
    case "triangular": {
      if (!res.llm)
        return { ok: false, error: "no LLM is configured: set MISTRAL_API_KEY for the workers" };
      // Redacted as what the agent's model is sent: a secret the change wrote into a file
      // (a key the workers know, one that looks like a key) is no text for the vendor.
      const sent = ctx.redact(reviewInput);
      const timed = timeoutSignal(input.signal, Math.max(1, input.msLeft()));
      const opts = {
        llm: res.llm,
        model: review.model ?? res.defaultModel ?? "mistral-large-latest",
        signal: timed.signal,
        diffCapChars: res.reviewDiffCapChars ?? 100_000,
        onTokens: async (count: number) => {
          await ctx.commit({
            metrics: { ...ctx.run.metrics, tokens: ctx.run.metrics.tokens + count },
          });
        },
        tokensLeft: () => tokensLeft(ctx.run),
      };
      try {
        outcome =
          review.type === "mistral"
            ? await runMistralReview(sent, opts)
            : await runTriangularReview(sent, opts);
      } catch (error) {
        if (error instanceof TokenBudgetSpent) {
          return { ok: false, error: error.message, budgetSpent: true };
        }
        throw error;
      } finally {
        timed.clear();
      }
      break;
    }
    default:
      return assertNever(review);
  }
  if (!outcome.ok) return outcome;
  const { findings } = outcome;
  return {
    ok: true,
    notes: outcome.notes ?? null,
    artifact: {
      id: (res.newId ?? ulid)(),
      runId: ctx.run.id,
      sessionId: ctx.run.sessionId,
      phase: "review",
      iteration: input.n,
      blockingIssues: findings.blockingIssues,
      nonBlockingIssues: findings.nonBlockingIssues,
      score: findings.score,
      fixPlan: findings.fixPlan,
      createdAt: ctx.now(),
    },
  };
}
