import { budgetSnapshot } from "@looprun/core";
import { eq } from "drizzle-orm";
import type { Db } from "./connection";
import { appendEvents } from "./event-log";
import { toRunRecord } from "./records";
import { runs } from "./schema";

/** Appends a `rollback_applied` event to a run (one that no worker holds: it is finished). */
export function recordRollback(
  db: Db,
  runId: string,
  data: Record<string, unknown>,
  now: number,
): void {
  db.transaction(
    (tx) => {
      const row = tx.select().from(runs).where(eq(runs.id, runId)).get();
      if (!row) return;
      const budget = budgetSnapshot(toRunRecord(row), now);
      appendEvents(db, runId, [{ type: "rollback_applied", data: { ...data, budget } }], now);
    },
    { behavior: "immediate" },
  );
}
