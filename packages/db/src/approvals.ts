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
import { and, desc, eq } from "drizzle-orm";
import type { Db } from "./connection";
import { appendEvents } from "./event-log";
import { toRunRecord } from "./records";
import { iterations, phaseArtifacts, runs } from "./schema";

/** What a person's answer to a waiting run did. */
export type ApprovalAnswer =
  | { kind: "not_found" }
  | { kind: "finished"; run: RunRecord }
  /** The run does not wait for this kind of answer (it runs, or waits for the other kind). */
  | { kind: "not_waiting"; run: RunRecord }
  | { kind: "done"; run: RunRecord };

type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];
type EventSpec = [type: NewEvent["type"], data: Record<string, unknown>, reason?: string];

/**
 * Loads the run, checks that it waits for `kinds`, and applies what `answer` returns in the
 * same transaction. The epoch moves on: no earlier holder of the run may write to it again.
 */
function answer(
  db: Db,
  runId: string,
  now: number,
  kinds: readonly ("plan" | "question")[],
  apply: (tx: Tx, run: RunRecord) => { patch: RunPatch; events: EventSpec[] },
): ApprovalAnswer {
  return db.transaction(
    (tx) => {
      const row = tx.select().from(runs).where(eq(runs.id, runId)).get();
      if (!row) return { kind: "not_found" } as const;
      const run = toRunRecord(row);
      if (isTerminal(run.status)) return { kind: "finished", run } as const;
      const approval = run.approval;
      if (
        run.status !== "awaiting_approval" ||
        !isWaiting(approval) ||
        !kinds.includes(approval.kind)
      ) {
        return { kind: "not_waiting", run } as const;
      }
      const { patch, events } = apply(tx, run);
      const updated = toRunRecord(
        tx
          .update(runs)
          .set({ ...endWait(run, now), ...patch, epoch: row.epoch + 1 })
          .where(eq(runs.id, runId))
          .returning()
          .get(),
      );
      appendEvents(
        db,
        runId,
        events.map(([type, data, reason]) => ({
          type,
          data: { ...data, budget: budgetSnapshot(updated, now, reason) },
        })),
        now,
      );
      return { kind: "done", run: updated } as const;
    },
    { behavior: "immediate" },
  );
}

/**
 * Approves the plan of a run that waits for it (optionally replaced by a person's edit: the
 * agent's plan gets a new version, or the planning phase's text is replaced) and queues it.
 */
export function approvePlan(
  db: Db,
  runId: string,
  now: number,
  edited: EditedPlan | null,
): ApprovalAnswer {
  return answer(db, runId, now, ["plan"], (tx, run) => {
    const waited = now - (run.approval?.requestedAt ?? now);
    const events: EventSpec[] = [];
    const patch: RunPatch = { status: "queued", progress: "plan approved: queued to go on" };
    let text = run.approval?.plan ?? null;
    if (edited !== null) {
      if (run.spec.phases.includes("planning")) {
        text = renderEditedPlan(edited);
        tx.insert(phaseArtifacts)
          .values({ runId, phase: "planning", content: text, createdAt: now })
          .onConflictDoUpdate({
            target: [phaseArtifacts.runId, phaseArtifacts.phase],
            set: { content: text, createdAt: now },
          })
          .run();
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
    return { patch, events };
  });
}

/**
 * Answers a blocked agent's question: the answer joins the blocked iteration's feedback (so the
 * next iteration's prompt holds it) and the run is queued to go on.
 */
export function replyToQuestion(
  db: Db,
  runId: string,
  now: number,
  message: string,
): ApprovalAnswer {
  return answer(db, runId, now, ["question"], (tx, run) => {
    const n = run.approval?.iteration ?? run.iteration;
    const blocked = tx
      .select()
      .from(iterations)
      .where(and(eq(iterations.runId, runId), eq(iterations.n, n)))
      .orderBy(desc(iterations.attempt))
      .limit(1)
      .get();
    if (blocked) {
      tx.update(iterations)
        .set({ feedback: feedbackWithReply(blocked.feedback, message) })
        .where(
          and(
            eq(iterations.runId, runId),
            eq(iterations.n, n),
            eq(iterations.attempt, blocked.attempt),
          ),
        )
        .run();
    }
    return {
      patch: { status: "queued", progress: `answered: queued to go on with iteration ${n + 1}` },
      events: [
        ["reply_received", { iteration: n, question: run.approval?.question ?? null, message }],
      ],
    };
  });
}

/** Rejects a waiting run's plan (or declines its question): the run ends `stopped`. */
export function rejectApproval(db: Db, runId: string, now: number, reason: string): ApprovalAnswer {
  return answer(db, runId, now, ["plan", "question"], (_tx, run) => {
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
  });
}
