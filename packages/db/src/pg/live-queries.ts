import { ACTIVE_STATUSES, type RunRecord } from "@looprun/core";
import { gte, inArray, or, sql } from "drizzle-orm";
import { toRunRecord } from "../records";
import type { PgDb } from "./connection";
import { runs } from "./schema";

type Reader = Pick<PgDb, "select">;

/**
 * ../live-queries.ts's `liveRuns` on PostgreSQL: every active run (the partial index of active
 * runs), the runs in `ids` and the runs created since `sinceId` (the primary key).
 */
export async function liveRuns(
  db: Reader,
  ids: readonly string[],
  sinceId: string,
): Promise<RunRecord[]> {
  const conditions = [inArray(runs.status, [...ACTIVE_STATUSES]), gte(runs.id, sinceId)];
  // One array parameter, however many ids (a statement takes at most 65535 parameters).
  if (ids.length > 0) conditions.push(sql`${runs.id} = any(${sql.param([...ids])}::text[])`);
  const rows = await db
    .select()
    .from(runs)
    .where(or(...conditions));
  return rows.map(toRunRecord);
}
