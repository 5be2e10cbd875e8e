import type { EventRecord, NewEvent } from "@looprun/core";
import { desc, eq } from "drizzle-orm";
import { type PgDb, poolOf } from "./connection";
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

/** The largest `seq` (an `integer`): a cursor past it reads nothing, not an out-of-range error. */
const MAX_SEQ = 2_147_483_647;

const PAGE =
  "select seq, type, at, data from events where run_id = $1 and seq > $2 order by seq limit $3";

/**
 * A run's events after `after`, oldest first: a named statement read as rows of values, mapped
 * here rather than through drizzle's select (its row mapping was ~0.6 ms of a page of 1000;
 * bench/RESULTS.md, the twenty-seventh session). `data` is a `json` column, parsed by the driver.
 */
export async function readEvents(
  db: PgDb,
  runId: string,
  after: number,
  limit: number,
): Promise<EventRecord[]> {
  const { rows } = await poolOf(db).query<
    [seq: number, type: EventRecord["type"], at: string, data: EventRecord["data"]]
  >({
    name: "looprun_event_page",
    text: PAGE,
    values: [runId, Math.min(after, MAX_SEQ), limit],
    rowMode: "array",
  });
  return rows.map(([seq, type, at, data]) => ({ runId, seq, type, at: Number(at), data }));
}
