import type { NewEvent } from "@looprun/core";
import { desc, eq } from "drizzle-orm";
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
    .select({ seq: events.seq, at: events.at })
    .from(events)
    .where(eq(events.runId, runId))
    .orderBy(desc(events.seq))
    .limit(1);
  let seq = last?.seq ?? 0;
  // Never before the previous event (../event-log.ts): `at` follows `seq`.
  const time = Math.max(at, last?.at ?? 0);
  await tx
    .insert(events)
    .values(list.map((e) => ({ runId, seq: ++seq, type: e.type, at: time, data: e.data })));
}
