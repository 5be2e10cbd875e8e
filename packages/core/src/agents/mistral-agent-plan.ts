import type { Plan } from "../domain/plan";
import type { ChatMessage, ChatModel, ChatTool } from "../llm/chat-model";
import { ChatModelError } from "../llm/chat-model";
import {
  parsePlanAnswer,
  planFromAnswer,
  REPLAN_AFTER_FAILURES,
  renderPlan,
  UpdateStepArgs,
} from "./plan";

// The mistral agent's plan: made before it acts (or ahead of iteration 1, for approval), and
// its steps' progress as the agent reports it with `update_step`.

/** The mistral agent's system prompt (its turns and its planning share it). */
export const SYSTEM = [
  "You are a careful software engineering agent working inside one workspace directory.",
  "Act through the tools: read files before changing them, make focused edits, run commands to check your work.",
  "Paths are relative to the workspace. Do not repeat a tool call that already failed the same way.",
  'When the task is complete, call `finish` with status "done" and a short summary. If you cannot continue, call `finish` with status "blocked".',
].join("\n");

export type Complete = (
  messages: ChatMessage[],
  tools: ChatTool[],
  json?: boolean,
) => ReturnType<ChatModel["complete"]>;

export interface ModelSettings {
  llm: ChatModel;
  model: string;
  temperature?: number;
  signal: AbortSignal;
}

/** Where plan changes are persisted and announced. */
export interface PlanRecorder {
  plan(
    type: "plan_created" | "plan_updated" | "step_completed",
    plan: Plan,
    data?: Record<string, unknown>,
  ): Promise<void>;
}

/** One chat completion with the agent's model settings; its tokens are counted. */
export function completer(
  input: ModelSettings,
  onTokens: (count: number) => Promise<void>,
): Complete {
  return async (messages, tools, json = false) => {
    const res = await input.llm.complete(
      {
        model: input.model,
        messages,
        ...(tools.length > 0 ? { tools } : {}),
        ...(json ? { json: true } : {}),
        ...(input.temperature !== undefined ? { temperature: input.temperature } : {}),
      },
      input.signal,
    );
    await onTokens(res.usage.totalTokens);
    return res;
  };
}

/**
 * Makes the agent's plan ahead of iteration 1 (the run's `approval: "plan"`: a person approves
 * it first); the agent then finds the plan on the run and does not plan again.
 */
export async function makeAgentPlan(
  input: ModelSettings & { prompt: string; onTokens: (count: number) => Promise<void> },
): Promise<{ ok: true; plan: Plan } | { ok: false; error: string }> {
  try {
    return await makePlan(input, completer(input, input.onTokens), null, null);
  } catch (error) {
    if (error instanceof ChatModelError) {
      return { ok: false, error: `the model could not be reached: ${error.message}` };
    }
    throw error;
  }
}

/** Asks for a JSON plan; an invalid answer is asked again once with the error. */
export async function makePlan(
  input: { prompt: string },
  complete: Complete,
  previous: Plan | null,
  reason: string | null,
): Promise<{ ok: true; plan: Plan } | { ok: false; error: string }> {
  const ask = [
    "Before acting, plan the work. Answer with a JSON object only:",
    '{"steps": [{"title": "…", "detail": "…"}]} — 1 to 30 concrete steps, in order.',
    previous ? `\nThe previous plan:\n${renderPlan(previous)}\nRe-plan because: ${reason}` : "",
  ].join("\n");
  const messages: ChatMessage[] = [
    { role: "system", content: SYSTEM },
    { role: "user", content: `${input.prompt}\n${ask}` },
  ];
  let error = "";
  for (let attempt = 1; attempt <= 2; attempt++) {
    const res = await complete(messages, [], true);
    const parsed = parsePlanAnswer(res.content);
    if (parsed.ok) return { ok: true, plan: planFromAnswer(parsed.plan, previous, reason) };
    error = parsed.error;
    messages.push({ role: "assistant", content: res.content ?? "" });
    messages.push({
      role: "user",
      content: `That plan is invalid (${error}). Answer again with the JSON object only.`,
    });
  }
  return { ok: false, error: `invalid plan twice: ${error}` };
}

export async function updateStep(
  input: { prompt: string; recorder: PlanRecorder },
  complete: Complete,
  plan: Plan,
  args: unknown,
): Promise<{ plan: Plan; outcome: { isError: boolean; result: string } }> {
  const parsed = UpdateStepArgs.safeParse(args);
  const step = parsed.success ? plan.steps.find((s) => s.id === parsed.data.step) : undefined;
  if (!parsed.success || !step) {
    return {
      plan,
      outcome: {
        isError: true,
        result: `invalid update_step: give an existing step number (1–${plan.steps.length}) and a status`,
      },
    };
  }
  const { status, note } = parsed.data;
  const next: Plan = {
    ...plan,
    steps: plan.steps.map((s) =>
      s.id === step.id
        ? {
            ...s,
            status,
            note: note ?? s.note,
            failures: s.failures + (status === "failed" ? 1 : 0),
          }
        : s,
    ),
  };
  const updated = next.steps.find((s) => s.id === step.id) ?? step;
  if (status === "done") {
    await input.recorder.plan("step_completed", next, { step: step.id, title: step.title });
  }
  if (status === "failed" && updated.failures >= REPLAN_AFTER_FAILURES) {
    const reason = `step ${step.id} ("${step.title}") failed ${updated.failures} times: ${note ?? "no reason given"}`;
    const made = await makePlan(input, complete, next, reason);
    if (made.ok) {
      await input.recorder.plan("plan_updated", made.plan, {
        reason,
        steps: made.plan.steps.length,
      });
      return {
        plan: made.plan,
        outcome: { isError: false, result: `Re-planned. The new plan:\n${renderPlan(made.plan)}` },
      };
    }
  }
  if (status !== "done") {
    await input.recorder.plan("plan_updated", next, { step: step.id, status });
  }
  return { plan: next, outcome: { isError: false, result: `step ${step.id} is ${status}` } };
}
