import type { NewEvent } from "@looprun/core";
import { eq, sql } from "drizzle-orm";
import type { Db } from "./connection";
import { events } from "./schema";

type Tx = Pick<Db, "select" | "insert">;

/**
 * Appends events with the next gap-free sequence numbers. Must run inside a write
 * transaction (`BEGIN IMMEDIATE`), which serialises writers per database.
 */
export function appendEvents(tx: Tx, runId: string, list: readonly NewEvent[], at: number): void {
  if (list.length === 0) return;
  const last = tx
    .select({ seq: sql<number>`coalesce(max(${events.seq}), 0)` })
    .from(events)
    .where(eq(events.runId, runId))
    .get();
  let seq = last?.seq ?? 0;
  tx.insert(events)
    .values(list.map((e) => ({ runId, seq: ++seq, type: e.type, at, data: e.data })))
    .run();
}
