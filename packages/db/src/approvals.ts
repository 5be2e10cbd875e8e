import type { EditedPlan } from "@looprun/core";
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
} from "./approval-answers";
import type { Db } from "./connection";
import { appendEvents } from "./event-log";
import { toRunRecord } from "./records";
import { iterations, phaseArtifacts, runs } from "./schema";

export type { ApprovalAnswer };

/**
 * Loads the run, checks that it waits for `kinds`, and writes what `decide` plans (see
 * approval-answers.ts) in the same transaction. The epoch moves on: no earlier holder of the
 * run may write to it again.
 */
function answer(
  db: Db,
  runId: string,
  now: number,
  kinds: readonly AnswerKind[],
  decide: (run: ReturnType<typeof toRunRecord>) => AnswerPlan,
): ApprovalAnswer {
  return db.transaction(
    (tx) => {
      const row = tx.select().from(runs).where(eq(runs.id, runId)).get();
      if (!row) return { kind: "not_found" } as const;
      const run = toRunRecord(row);
      const refused = refusal(run, kinds);
      if (refused) return refused;
      const plan = decide(run);
      if (plan.planningArtifact !== undefined) {
        const content = plan.planningArtifact;
        tx.insert(phaseArtifacts)
          .values({ runId, phase: "planning", content, createdAt: now })
          .onConflictDoUpdate({
            target: [phaseArtifacts.runId, phaseArtifacts.phase],
            set: { content, createdAt: now },
          })
          .run();
      }
      if (plan.iterationFeedback) {
        const { n, feedback } = plan.iterationFeedback;
        const blocked = tx
          .select()
          .from(iterations)
          .where(and(eq(iterations.runId, runId), eq(iterations.n, n)))
          .orderBy(desc(iterations.attempt))
          .limit(1)
          .get();
        if (blocked) {
          tx.update(iterations)
            .set({ feedback: feedback(blocked.feedback) })
            .where(
              and(
                eq(iterations.runId, runId),
                eq(iterations.n, n),
                eq(iterations.attempt, blocked.attempt),
              ),
            )
            .run();
        }
      }
      const updated = toRunRecord(
        tx
          .update(runs)
          .set({ ...answeredRun(run, now, plan), epoch: row.epoch + 1 })
          .where(eq(runs.id, runId))
          .returning()
          .get(),
      );
      appendEvents(db, runId, answerEvents(plan, updated, now), now);
      return { kind: "done", run: updated } as const;
    },
    { behavior: "immediate" },
  );
}

/** Approves the plan of a run that waits for it (optionally edited) and queues it. */
export function approvePlan(
  db: Db,
  runId: string,
  now: number,
  edited: EditedPlan | null,
): ApprovalAnswer {
  return answer(db, runId, now, ["plan"], (run) => planApproval(run, now, edited));
}

/** Answers a blocked agent's question; the run is queued to go on. */
export function replyToQuestion(
  db: Db,
  runId: string,
  now: number,
  message: string,
): ApprovalAnswer {
  return answer(db, runId, now, ["question"], (run) => planReply(run, message));
}

/** Rejects a waiting run's plan (or declines its question): the run ends `stopped`. */
export function rejectApproval(db: Db, runId: string, now: number, reason: string): ApprovalAnswer {
  return answer(db, runId, now, ["plan", "question"], (run) => planRejection(run, now, reason));
}
