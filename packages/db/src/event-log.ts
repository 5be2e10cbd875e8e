import type { EventRecord, NewEvent } from "@looprun/core";
import type { Db } from "./connection";
import { preparedOnce, sqliteClient } from "./prepared";

/**
 * The next gap-free seq of the run, computed in the insert itself; its time is never before the
 * previous event's (two writers' clocks read before they queued for the lock), so that `at`
 * follows `seq`.
 */
const statements = (db: Db) => ({
  append: sqliteClient(db).prepare<[{ runId: string; type: string; at: number; data: string }]>(
    `insert into events (run_id, seq, type, at, data)
     values (:runId, (select coalesce(max(seq), 0) + 1 from events where run_id = :runId),
       :type,
       max(:at, coalesce((select at from events where run_id = :runId order by seq desc limit 1), 0)),
       :data)`,
  ),
  page: sqliteClient(db)
    .prepare<[runId: string, after: number, limit: number]>(
      "select seq, type, at, data from events where run_id = ? and seq > ? order by seq limit ?",
    )
    .raw(),
});

/**
 * Appends events with the next gap-free sequence numbers. Must run inside a write
 * transaction (`BEGIN IMMEDIATE`) on `db`'s connection, which serialises writers per database.
 */
export function appendEvents(db: Db, runId: string, list: readonly NewEvent[], at: number): void {
  if (list.length === 0) return;
  const { append } = preparedOnce(db, statements);
  for (const e of list) append.run({ runId, type: e.type, at, data: JSON.stringify(e.data) });
}

/**
 * A run's events after `after`, oldest first. Read as rows of values and mapped here rather than
 * through drizzle's select: for a page of 1000 events its row mapping was 0.6 of 1.5 ms
 * (bench/RESULTS.md, the twenty-seventh session).
 */
export function readEvents(db: Db, runId: string, after: number, limit: number): EventRecord[] {
  const rows = preparedOnce(db, statements).page.all(runId, after, limit) as [
    seq: number,
    type: EventRecord["type"],
    at: number,
    data: string,
  ][];
  return rows.map(([seq, type, at, data]) => ({ runId, seq, type, at, data: JSON.parse(data) }));
}
