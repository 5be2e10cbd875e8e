import type { FailurePattern, SessionRunSummary, ToolFailure } from "@looprun/core";
import {
  type ClaimedRun,
  isTerminal,
  LeaseLostError,
  mergeStatus,
  type PhaseArtifact,
  PIPELINE_PHASES,
  type RunMutation,
  type RunRecord,
  type RunStore,
} from "@looprun/core";
import { and, desc, eq, inArray, lt, sql } from "drizzle-orm";
import { writeArtifacts } from "./artifact-writes";
import type { Db } from "./connection";
import { appendEvents } from "./event-log";
import { recordPatterns, workspacePatterns } from "./failure-patterns";
import { toIterationRecord, toPhaseArtifact, toRunRecord } from "./records";
import { iterations, phaseArtifacts, runs, toolCalls } from "./schema";

const FILE_WRITERS = ["write_file", "edit_file"];

/** The engine's RunStore on SQLite: every call is one `BEGIN IMMEDIATE` transaction. */
export class SqliteRunStore implements RunStore {
  constructor(private readonly db: Db) {}

  async claimRun(runId: string): Promise<ClaimedRun | null> {
    return this.db.transaction(
      (tx) => {
        const row = tx.select().from(runs).where(eq(runs.id, runId)).get();
        if (!row) return null;
        let run = toRunRecord(row);
        if (!isTerminal(run.status)) {
          const updated = tx
            .update(runs)
            .set({ epoch: run.epoch + 1 })
            .where(eq(runs.id, runId))
            .returning()
            .get();
          run = toRunRecord(updated);
        }
        const last = tx
          .select()
          .from(iterations)
          .where(eq(iterations.runId, runId))
          .orderBy(desc(iterations.n), desc(iterations.attempt))
          .limit(1)
          .get();
        const decided = tx
          .select()
          .from(iterations)
          .where(and(eq(iterations.runId, runId), inArray(iterations.status, ["passed", "failed"])))
          .orderBy(desc(iterations.n), desc(iterations.attempt))
          .limit(1)
          .get();
        return {
          run,
          lastIteration: last ? toIterationRecord(last) : null,
          lastDecided: decided ? toIterationRecord(decided) : null,
        };
      },
      { behavior: "immediate" },
    );
  }

  async commit(runId: string, epoch: number, m: RunMutation, now: number): Promise<RunRecord> {
    return this.db.transaction(
      (tx) => {
        const row = tx.select().from(runs).where(eq(runs.id, runId)).get();
        if (!row || row.epoch !== epoch) throw new LeaseLostError(runId, epoch);
        let result = row;
        if (m.run && Object.keys(m.run).length > 0) {
          const status = mergeStatus(row.status as RunRecord["status"], m.run.status);
          result = tx
            .update(runs)
            .set({ ...m.run, status })
            .where(and(eq(runs.id, runId), eq(runs.epoch, epoch)))
            .returning()
            .get();
        }
        if (m.insertIteration) {
          const { runId: _ignored, ...it } = m.insertIteration;
          tx.insert(iterations)
            .values({ ...it, runId })
            .run();
        }
        if (m.updateIteration) {
          const { n, attempt, patch } = m.updateIteration;
          tx.update(iterations)
            .set(patch)
            .where(
              and(
                eq(iterations.runId, runId),
                eq(iterations.n, n),
                eq(iterations.attempt, attempt),
              ),
            )
            .run();
        }
        if (m.toolCalls && m.toolCalls.length > 0) {
          const last = tx
            .select({ seq: sql<number>`coalesce(max(${toolCalls.seq}), 0)` })
            .from(toolCalls)
            .where(eq(toolCalls.runId, runId))
            .get();
          let seq = last?.seq ?? 0;
          tx.insert(toolCalls)
            .values(
              m.toolCalls.map((c) => ({
                ...c,
                args: c.args ?? null,
                runId,
                seq: ++seq,
                createdAt: now,
              })),
            )
            .run();
        }
        writeArtifacts(tx, runId, m);
        recordPatterns(tx, row.workspace, runId, m, now);
        appendEvents(tx, runId, m.events ?? [], now);
        return toRunRecord(result);
      },
      { behavior: "immediate" },
    );
  }

  async sessionHistory(
    sessionId: string,
    runId: string,
    limit: number,
  ): Promise<SessionRunSummary[]> {
    const earlier = this.db
      .select()
      .from(runs)
      .where(and(eq(runs.sessionId, sessionId), lt(runs.id, runId)))
      .orderBy(desc(runs.id))
      .limit(limit)
      .all();
    return earlier.map((r) => {
      const writes = this.db
        .select({ args: toolCalls.args })
        .from(toolCalls)
        .where(
          and(
            eq(toolCalls.runId, r.id),
            eq(toolCalls.isError, false),
            inArray(toolCalls.tool, FILE_WRITERS),
          ),
        )
        .all();
      const files = writes
        .map((w) => (w.args as { path?: unknown } | null)?.path)
        .filter((p): p is string => typeof p === "string");
      return {
        runId: r.id,
        task: r.task,
        status: r.status,
        reason: r.reason,
        summary: r.summary,
        filesTouched: [...new Set(files)],
      };
    });
  }

  async toolFailures(runId: string, limit: number): Promise<ToolFailure[]> {
    const rows = this.db
      .select()
      .from(toolCalls)
      .where(and(eq(toolCalls.runId, runId), eq(toolCalls.isError, true)))
      .orderBy(desc(toolCalls.seq))
      .limit(limit)
      .all();
    return rows
      .reverse()
      .map((c) => ({ iteration: c.iteration, tool: c.tool, args: c.args, error: c.result }));
  }

  async failurePatterns(workspace: string, limit: number): Promise<FailurePattern[]> {
    return workspacePatterns(this.db, workspace, limit);
  }

  async phaseArtifacts(runId: string): Promise<PhaseArtifact[]> {
    const rows = this.db.select().from(phaseArtifacts).where(eq(phaseArtifacts.runId, runId)).all();
    return rows
      .map(toPhaseArtifact)
      .sort((a, b) => PIPELINE_PHASES.indexOf(a.phase) - PIPELINE_PHASES.indexOf(b.phase));
  }

  async getRun(runId: string): Promise<RunRecord | null> {
    const row = this.db.select().from(runs).where(eq(runs.id, runId)).get();
    return row ? toRunRecord(row) : null;
  }
}
