import type { NewEvent } from "@looprun/core";
import { eq, sql } from "drizzle-orm";
import type { PgDb } from "./connection";
import { events } from "./schema";

type Tx = Pick<PgDb, "select" | "insert">;

/**
 * Appends events with the next gap-free sequence numbers. The caller holds the run's row lock
 * (`SELECT … FOR UPDATE` in the same transaction) or has just inserted the run: every writer
 * of a run's events takes that lock first, so max(seq) cannot move under it.
 */
export async function appendEvents(
  tx: Tx,
  runId: string,
  list: readonly NewEvent[],
  at: number,
): Promise<void> {
  if (list.length === 0) return;
  const [last] = await tx
    .select({ seq: sql<number>`coalesce(max(${events.seq}), 0)::int` })
    .from(events)
    .where(eq(events.runId, runId));
  let seq = last?.seq ?? 0;
  await tx
    .insert(events)
    .values(list.map((e) => ({ runId, seq: ++seq, type: e.type, at, data: e.data })));
}
