import { budgetSnapshot, endWait, isTerminal, type RunRecord } from "@looprun/core";
import { and, eq } from "drizzle-orm";
import type { Db } from "./connection";
import { appendEvents } from "./event-log";
import { toRunRecord } from "./records";
import { iterations, runs } from "./schema";

export type StopRequest =
  | { kind: "not_found" }
  | { kind: "finished"; run: RunRecord }
  /** `waiting`: the run was waiting for a person, so no worker holds it: it may end at once. */
  | { kind: "stopping"; run: RunRecord; waiting?: boolean };

/** Marks the run `stopping` (idempotent); a finished run is left as it is. */
export function requestStop(db: Db, runId: string, now: number): StopRequest {
  return db.transaction(
    (tx) => {
      const row = tx.select().from(runs).where(eq(runs.id, runId)).get();
      if (!row) return { kind: "not_found" } as const;
      const run = toRunRecord(row);
      if (isTerminal(run.status)) return { kind: "finished", run } as const;
      if (run.status === "stopping") return { kind: "stopping", run } as const;
      const waiting = run.status === "awaiting_approval";
      const updated = toRunRecord(
        tx
          .update(runs)
          .set({ status: "stopping", stopRequestedAt: now, progress: "stopping" })
          .where(eq(runs.id, runId))
          .returning()
          .get(),
      );
      appendEvents(
        db,
        runId,
        [{ type: "stop_requested", data: { budget: budgetSnapshot(updated, now) } }],
        now,
      );
      return { kind: "stopping", run: updated, waiting } as const;
    },
    { behavior: "immediate" },
  );
}

/**
 * Ends a `stopping` run that no worker holds (its job was removed or is gone). Bumps the
 * epoch so that no earlier holder can write to it again.
 */
export function finalizeStop(db: Db, runId: string, now: number): RunRecord | null {
  return db.transaction(
    (tx) => {
      const row = tx.select().from(runs).where(eq(runs.id, runId)).get();
      if (row?.status !== "stopping") return row ? toRunRecord(row) : null;
      tx.update(iterations)
        .set({ status: "abandoned", finishedAt: now })
        .where(and(eq(iterations.runId, runId), eq(iterations.status, "running")))
        .run();
      const summary = "stopped by request";
      const run = toRunRecord(
        tx
          .update(runs)
          .set({
            // A run stopped while it waited for a person: the wait does not count as run time.
            ...endWait(toRunRecord(row), now),
            status: "stopped",
            reason: "stopped",
            summary,
            progress: summary,
            finishedAt: now,
            epoch: row.epoch + 1,
          })
          .where(eq(runs.id, runId))
          .returning()
          .get(),
      );
      appendEvents(
        db,
        runId,
        [
          {
            type: "run_finished",
            data: {
              status: "stopped",
              reason: "stopped",
              summary,
              budget: budgetSnapshot(run, now, "stopped"),
            },
          },
        ],
        now,
      );
      return run;
    },
    { behavior: "immediate" },
  );
}
