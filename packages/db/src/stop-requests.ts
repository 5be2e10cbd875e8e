import {
  type AgentResult,
  abandonedAgent,
  abandonedAgentFinished,
  budgetSnapshot,
  endWait,
  isTerminal,
  type NewEvent,
  type RunRecord,
} from "@looprun/core";
import { and, eq } from "drizzle-orm";
import type { Db } from "./connection";
import { appendEvents } from "./event-log";
import { type RunRow, toRunRecord } from "./records";
import { iterations, runs } from "./schema";

// The two transitions of a stop, shared by the SQLite functions below and the PostgreSQL ones
// (pg/stop-requests.ts): what changes in the run's row, and the event that says so.

/** A run asked to stop: its row's change. */
export const stoppingChange = (now: number) =>
  ({ status: "stopping", stopRequestedAt: now, progress: "stopping" }) as const;

export const stopRequestedEvents = (run: RunRecord, now: number): NewEvent[] => [
  { type: "stop_requested", data: { budget: budgetSnapshot(run, now) } },
];

const STOPPED_SUMMARY = "stopped by request";

/**
 * A `stopping` run that no worker holds, ended: its row's change. The epoch moves on, so that
 * no earlier holder can write to it again; a run stopped while it waited for a person does
 * not count the wait as run time.
 */
export const stoppedChange = (row: RunRow, now: number) => ({
  ...endWait(toRunRecord(row), now),
  status: "stopped" as const,
  reason: "stopped" as const,
  summary: STOPPED_SUMMARY,
  progress: STOPPED_SUMMARY,
  finishedAt: now,
  epoch: row.epoch + 1,
});

/**
 * The events of a `stopping` run ended with no worker holding it: the `agent_finished` of each
 * agent of an attempt it abandons (see abandonedAgents), then `run_finished`.
 */
export const stoppedEvents = (
  run: RunRecord,
  now: number,
  agents: readonly AbandonedAgent[] = [],
): NewEvent[] => [
  ...agents.map(({ n, agent }) => ({
    type: "agent_finished" as const,
    data: { ...abandonedAgentFinished(n, agent), budget: budgetSnapshot(run, now) },
  })),
  {
    type: "run_finished",
    data: {
      status: "stopped",
      reason: "stopped",
      summary: STOPPED_SUMMARY,
      budget: budgetSnapshot(run, now, "stopped"),
    },
  },
];

/** The attempt in flight of a run stopped with no worker holding it (its worker is gone). */
export const abandonedByStop = (now: number) =>
  ({ status: "abandoned", outcome: "stopped", finishedAt: now }) as const;

interface AbandonedAgent {
  n: number;
  attempt: number;
  agent: AgentResult;
}

/**
 * The agent results the attempts a stop abandons are given: those whose agent was what ran (a
 * crashed worker's), stored on the attempt and told in its `agent_finished`.
 */
export const abandonedAgents = (
  attempts: readonly { n: number; attempt: number; startedAt: number; agent: unknown }[],
  now: number,
): AbandonedAgent[] =>
  attempts.flatMap(({ n, attempt, ...rest }) => {
    const agent = abandonedAgent(rest, now);
    return agent ? [{ n, attempt, agent }] : [];
  });

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
        tx.update(runs).set(stoppingChange(now)).where(eq(runs.id, runId)).returning().get(),
      );
      appendEvents(db, runId, stopRequestedEvents(updated, now), now);
      return { kind: "stopping", run: updated, waiting } as const;
    },
    { behavior: "immediate" },
  );
}

/** Ends a `stopping` run that no worker holds (its job was removed or is gone). */
export function finalizeStop(db: Db, runId: string, now: number): RunRecord | null {
  return db.transaction(
    (tx) => {
      const row = tx.select().from(runs).where(eq(runs.id, runId)).get();
      if (row?.status !== "stopping") return row ? toRunRecord(row) : null;
      const attempts = tx
        .update(iterations)
        .set(abandonedByStop(now))
        .where(and(eq(iterations.runId, runId), eq(iterations.status, "running")))
        .returning({
          n: iterations.n,
          attempt: iterations.attempt,
          startedAt: iterations.startedAt,
          agent: iterations.agent,
        })
        .all();
      const agents = abandonedAgents(attempts, now);
      for (const { n, attempt, agent } of agents) {
        tx.update(iterations)
          .set({ agent })
          .where(
            and(eq(iterations.runId, runId), eq(iterations.n, n), eq(iterations.attempt, attempt)),
          )
          .run();
      }
      const run = toRunRecord(
        tx.update(runs).set(stoppedChange(row, now)).where(eq(runs.id, runId)).returning().get(),
      );
      appendEvents(db, runId, stoppedEvents(run, now, agents), now);
      return run;
    },
    { behavior: "immediate" },
  );
}
