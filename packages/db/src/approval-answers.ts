import {
  budgetSnapshot,
  type EditedPlan,
  endWait,
  feedbackWithReply,
  isTerminal,
  isWaiting,
  type NewEvent,
  planFromEdit,
  type RunPatch,
  type RunRecord,
  renderEditedPlan,
  renderPlan,
} from "@looprun/core";

/** What a person's answer to a waiting run did. */
export type ApprovalAnswer =
  | { kind: "not_found" }
  | { kind: "finished"; run: RunRecord }
  /** The run does not wait for this kind of answer (it runs, or waits for the other kind). */
  | { kind: "not_waiting"; run: RunRecord }
  | { kind: "done"; run: RunRecord };

type EventSpec = [type: NewEvent["type"], data: Record<string, unknown>, reason?: string];

/**
 * What an answer writes, decided from the run as read inside the answer's transaction: the
 * run's patch, its events, and the engine-specific rows around it (the planning phase's
 * artifact replaced by an edit; the blocked iteration's feedback with the reply).
 */
export interface AnswerPlan {
  patch: RunPatch;
  events: EventSpec[];
  /** The planning phase's artifact, replaced by a person's edit. */
  planningArtifact?: string;
  /** The blocked iteration (its latest attempt) gets this feedback. */
  iterationFeedback?: { n: number; feedback: (previous: string | null) => string };
}

export type AnswerKind = "plan" | "question";

/** `null` when the run waits for one of `kinds`; else what to answer instead. */
export function refusal(
  run: RunRecord,
  kinds: readonly AnswerKind[],
): Exclude<ApprovalAnswer, { kind: "done" | "not_found" }> | null {
  if (isTerminal(run.status)) return { kind: "finished", run };
  const approval = run.approval;
  if (run.status !== "awaiting_approval" || !isWaiting(approval) || !kinds.includes(approval.kind))
    return { kind: "not_waiting", run };
  return null;
}

/** The run's update: the wait ends, the plan's patch applies, the epoch moves on. */
export function answeredRun(run: RunRecord, now: number, plan: AnswerPlan): RunPatch {
  return { ...endWait(run, now), ...plan.patch };
}

/** The answer's events, each with the budget snapshot of the updated run. */
export function answerEvents(plan: AnswerPlan, updated: RunRecord, now: number): NewEvent[] {
  return plan.events.map(([type, data, reason]) => ({
    type,
    data: { ...data, budget: budgetSnapshot(updated, now, reason) },
  }));
}

/**
 * Approves the plan of a run that waits for it (optionally replaced by a person's edit: the
 * agent's plan gets a new version, or the planning phase's text is replaced) and queues it.
 */
export function planApproval(run: RunRecord, now: number, edited: EditedPlan | null): AnswerPlan {
  const waited = now - (run.approval?.requestedAt ?? now);
  const events: EventSpec[] = [];
  const patch: RunPatch = { status: "queued", progress: "plan approved: queued to go on" };
  const result: AnswerPlan = { patch, events };
  let text = run.approval?.plan ?? null;
  if (edited !== null) {
    if (run.spec.phases.includes("planning")) {
      text = renderEditedPlan(edited);
      result.planningArtifact = text;
      events.push([
        "plan_updated",
        { iteration: 0, phase: "planning", steps: edited.steps.length, editedBy: "person" },
      ]);
    } else {
      const plan = planFromEdit(run.plan, edited);
      text = renderPlan(plan);
      patch.plan = plan;
      events.push([
        "plan_updated",
        {
          iteration: 0,
          version: plan.version,
          reason: plan.reason,
          steps: plan.steps.length,
          editedBy: "person",
          plan,
        },
      ]);
    }
  }
  if (run.approval) patch.approval = { ...run.approval, plan: text, resolvedAt: now };
  events.push(["approval_granted", { kind: "plan", edited: edited !== null, waitedMs: waited }]);
  return result;
}

/**
 * Answers a blocked agent's question: the answer joins the blocked iteration's feedback (so the
 * next iteration's prompt holds it) and the run is queued to go on.
 */
export function planReply(run: RunRecord, message: string): AnswerPlan {
  const n = run.approval?.iteration ?? run.iteration;
  return {
    patch: { status: "queued", progress: `answered: queued to go on with iteration ${n + 1}` },
    events: [
      ["reply_received", { iteration: n, question: run.approval?.question ?? null, message }],
    ],
    iterationFeedback: { n, feedback: (previous) => feedbackWithReply(previous, message) },
  };
}

/** Rejects a waiting run's plan (or declines its question): the run ends `stopped`. */
export function planRejection(run: RunRecord, now: number, reason: string): AnswerPlan {
  const kind = run.approval?.kind ?? "plan";
  const summary = `${kind === "plan" ? "plan rejected" : "question declined"}: ${reason}`.slice(
    0,
    2000,
  );
  return {
    patch: {
      status: "stopped",
      reason: "stopped",
      summary,
      progress: summary,
      finishedAt: now,
      activePgid: null,
    },
    events: [
      ["approval_rejected", { kind, reason }],
      ["run_finished", { status: "stopped", reason: "stopped", summary }, "stopped"],
    ],
  };
}
