import { isTerminal, type RunRecord } from "@looprun/core";
import { and, eq } from "drizzle-orm";
import { toRunRecord } from "../records";
import {
  abandonedAgents,
  abandonedByStop,
  type StopRequest,
  stoppedChange,
  stoppedEvents,
  stoppingChange,
  stopRequestedEvents,
} from "../stop-requests";
import type { PgDb } from "./connection";
import { appendEvents } from "./event-log";
import { iterations, runs } from "./schema";

/** Marks the run `stopping` (idempotent); a finished run is left as it is (../stop-requests.ts). */
export async function requestStop(db: PgDb, runId: string, now: number): Promise<StopRequest> {
  return db.transaction(async (tx) => {
    const [row] = await tx.select().from(runs).where(eq(runs.id, runId)).for("update");
    if (!row) return { kind: "not_found" } as const;
    const run = toRunRecord(row);
    if (isTerminal(run.status)) return { kind: "finished", run } as const;
    if (run.status === "stopping") return { kind: "stopping", run } as const;
    const waiting = run.status === "awaiting_approval";
    const [updated] = await tx
      .update(runs)
      .set(stoppingChange(now))
      .where(eq(runs.id, runId))
      .returning();
    if (!updated) throw new Error(`run ${runId} vanished under its row lock`);
    const stopping = toRunRecord(updated);
    await appendEvents(tx, runId, stopRequestedEvents(stopping, now), now);
    return { kind: "stopping", run: stopping, waiting } as const;
  });
}

/** Ends a `stopping` run that no worker holds, bumping its epoch (../stop-requests.ts). */
export async function finalizeStop(
  db: PgDb,
  runId: string,
  now: number,
): Promise<RunRecord | null> {
  return db.transaction(async (tx) => {
    const [row] = await tx.select().from(runs).where(eq(runs.id, runId)).for("update");
    if (row?.status !== "stopping") return row ? toRunRecord(row) : null;
    const attempts = await tx
      .update(iterations)
      .set(abandonedByStop(now))
      .where(and(eq(iterations.runId, runId), eq(iterations.status, "running")))
      .returning({
        n: iterations.n,
        attempt: iterations.attempt,
        startedAt: iterations.startedAt,
        agent: iterations.agent,
      });
    const agents = abandonedAgents(attempts, now);
    for (const { n, attempt, agent } of agents) {
      await tx
        .update(iterations)
        .set({ agent })
        .where(
          and(eq(iterations.runId, runId), eq(iterations.n, n), eq(iterations.attempt, attempt)),
        );
    }
    const [updated] = await tx
      .update(runs)
      .set(stoppedChange(row, now))
      .where(eq(runs.id, runId))
      .returning();
    if (!updated) throw new Error(`run ${runId} vanished under its row lock`);
    const run = toRunRecord(updated);
    await appendEvents(tx, runId, stoppedEvents(run, now, agents), now);
    return run;
  });
}
