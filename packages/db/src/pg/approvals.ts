import type { EditedPlan, RunRecord } from "@looprun/core";
import { and, desc, eq } from "drizzle-orm";
import {
  type AnswerKind,
  type AnswerPlan,
  type ApprovalAnswer,
  answerEvents,
  answeredRun,
  planApproval,
  planRejection,
  planReply,
  refusal,
} from "../approval-answers";
import { toRunRecord } from "../records";
import type { PgDb } from "./connection";
import { appendEvents } from "./event-log";
import { withoutNul } from "./nul-bytes";
import { iterations, phaseArtifacts, runs } from "./schema";

/**
 * ../approvals.ts on PostgreSQL: the run's row is locked (`FOR UPDATE`) before it is checked,
 * so an answer and a worker's commit, a stop or another answer are applied one after the other.
 */
async function answer(
  db: PgDb,
  runId: string,
  now: number,
  kinds: readonly AnswerKind[],
  decide: (run: RunRecord) => AnswerPlan,
): Promise<ApprovalAnswer> {
  return db.transaction(async (tx) => {
    const [row] = await tx.select().from(runs).where(eq(runs.id, runId)).for("update");
    if (!row) return { kind: "not_found" } as const;
    const run = toRunRecord(row);
    const refused = refusal(run, kinds);
    if (refused) return refused;
    const plan = withoutNul(decide(run));
    if (plan.planningArtifact !== undefined) {
      const content = plan.planningArtifact;
      await tx
        .insert(phaseArtifacts)
        .values({ runId, phase: "planning", content, createdAt: now })
        .onConflictDoUpdate({
          target: [phaseArtifacts.runId, phaseArtifacts.phase],
          set: { content, createdAt: now },
        });
    }
    if (plan.iterationFeedback) {
      const { n, feedback } = plan.iterationFeedback;
      const [blocked] = await tx
        .select()
        .from(iterations)
        .where(and(eq(iterations.runId, runId), eq(iterations.n, n)))
        .orderBy(desc(iterations.attempt))
        .limit(1);
      if (blocked) {
        await tx
          .update(iterations)
          .set({ feedback: withoutNul(feedback(blocked.feedback)) })
          .where(
            and(
              eq(iterations.runId, runId),
              eq(iterations.n, n),
              eq(iterations.attempt, blocked.attempt),
            ),
          );
      }
    }
    const [updatedRow] = await tx
      .update(runs)
      .set({ ...answeredRun(run, now, plan), epoch: row.epoch + 1 })
      .where(eq(runs.id, runId))
      .returning();
    if (!updatedRow) throw new Error(`run ${runId} vanished under its row lock`);
    const updated = toRunRecord(updatedRow);
    await appendEvents(tx, runId, answerEvents(plan, updated, now), now);
    return { kind: "done", run: updated } as const;
  });
}

export function approvePlan(
  db: PgDb,
  runId: string,
  now: number,
  edited: EditedPlan | null,
): Promise<ApprovalAnswer> {
  return answer(db, runId, now, ["plan"], (run) => planApproval(run, now, edited));
}

export function replyToQuestion(
  db: PgDb,
  runId: string,
  now: number,
  message: string,
): Promise<ApprovalAnswer> {
  return answer(db, runId, now, ["question"], (run) => planReply(run, message));
}

export function rejectApproval(
  db: PgDb,
  runId: string,
  now: number,
  reason: string,
): Promise<ApprovalAnswer> {
  return answer(db, runId, now, ["plan", "question"], (run) => planRejection(run, now, reason));
}
