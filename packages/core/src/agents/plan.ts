import { z } from "zod";
import type { Plan, StepStatus } from "../domain/plan";
import { parseJsonAnswer } from "../util/json-answer";

/** The plan a model must answer with (JSON), validated before it is used. */
export const PlanAnswer = z.object({
  steps: z
    .array(
      z.object({
        title: z.string().trim().min(1).max(500),
        detail: z.string().max(2000).optional(),
      }),
    )
    .min(1)
    .max(30),
});
export type PlanAnswer = z.infer<typeof PlanAnswer>;

/** A step that fails this many times triggers a re-plan. */
export const REPLAN_AFTER_FAILURES = 2;

export function planFromAnswer(
  answer: PlanAnswer,
  previous: Plan | null,
  reason: string | null,
): Plan {
  return {
    version: (previous?.version ?? 0) + 1,
    reason,
    steps: answer.steps.map((s, i) => ({
      id: i + 1,
      title: s.title,
      detail: s.detail ?? null,
      status: "todo",
      failures: 0,
      note: null,
    })),
  };
}

export function parsePlanAnswer(
  text: string | null,
): { ok: true; plan: PlanAnswer } | { ok: false; error: string } {
  const parsed = parseJsonAnswer(PlanAnswer, text);
  return parsed.ok ? { ok: true, plan: parsed.value } : parsed;
}

/**
 * The plan as the agent (and a person approving it) reads it: a line a step, its detail
 * indented under it — a step's detail is what the model (or the person who edited the plan)
 * said of how to do it.
 */
export function renderPlan(plan: Plan): string {
  const mark: Record<StepStatus, string> = {
    todo: "[ ]",
    in_progress: "[~]",
    done: "[x]",
    failed: "[!]",
  };
  return plan.steps
    .map((s) => {
      const line = `${mark[s.status]} ${s.id}. ${s.title}${s.note ? ` — ${s.note}` : ""}`;
      const detail = s.detail?.trim();
      return detail ? `${line}\n${detail.replace(/^/gm, "      ")}` : line;
    })
    .join("\n");
}

export const UpdateStepArgs = z.strictObject({
  step: z.number().int().min(1),
  status: z.enum(["in_progress", "done", "failed"]),
  note: z.string().max(2000).optional(),
});
