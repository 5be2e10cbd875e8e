import type { FailurePattern, SessionRunSummary, ToolFailure } from "@looprun/core";
import {
  type ClaimedRun,
  type ClaimStart,
  isTerminal,
  LeaseLostError,
  type PhaseArtifact,
  type RunMutation,
  type RunRecord,
  type RunStore,
  runRowChanges,
  startsOnClaim,
  type WorkspaceHold,
} from "@looprun/core";
import { and, asc, desc, eq, inArray, lt, sql } from "drizzle-orm";
import { toIterationRecord, toolCallRows, toRunRecord, toToolFailure } from "../records";
import { type HeldRun, ownRollbackHold, ownRollbackHolder } from "../workspace-holds";
import { listPhaseArtifacts } from "./artifact-queries";
import { writeArtifacts } from "./artifact-writes";
import type { PgDb } from "./connection";
import { appendEvents } from "./event-log";
import { recordPatterns, workspacePatterns } from "./failure-patterns";
import { withoutNul } from "./nul-bytes";
import { isPgUnavailable } from "./pg-errors";
import { iterationSnapshots, iterations, runs, toolCalls } from "./schema";
import { holdWorkspace, releaseWorkspace, workspaceHeldUntil } from "./workspace-holds";

const FILE_WRITERS = ["write_file", "edit_file"];

type Tx = Parameters<Parameters<PgDb["transaction"]>[0]>[0];

/**
 * The engine's RunStore on PostgreSQL, with the behaviour of SqliteRunStore. Every write is
 * one READ COMMITTED transaction that first locks the run's row (`SELECT … FOR UPDATE`): it
 * serialises the writers of one run — the epoch check, the status merge and the numbering of
 * events and tool calls see the latest committed state — while other runs go on in parallel.
 */
export class PgRunStore implements RunStore {
  constructor(private readonly db: PgDb) {}

  async claimRun(runId: string, start?: ClaimStart): Promise<ClaimedRun | null> {
    return this.db.transaction(async (tx) => {
      const [row] = await tx.select().from(runs).where(eq(runs.id, runId)).for("update");
      if (!row) return null;
      let run = toRunRecord(row);
      if (!isTerminal(run.status)) {
        const [updated] = await tx
          .update(runs)
          .set({ epoch: sql`${runs.epoch} + 1` })
          .where(eq(runs.id, runId))
          .returning();
        if (updated) run = toRunRecord(updated);
      }
      let started = false;
      if (start && startsOnClaim(run) && (await workspaceHeldUntil(tx, run, start.now)) === null) {
        started = true;
        run = await this.apply(tx, runId, run.epoch, start.mutation(run), start.now);
      }
      const [last] = await tx
        .select()
        .from(iterations)
        .where(eq(iterations.runId, runId))
        .orderBy(desc(iterations.n), desc(iterations.attempt))
        .limit(1);
      const [decided] = await tx
        .select()
        .from(iterations)
        .where(and(eq(iterations.runId, runId), inArray(iterations.status, ["passed", "failed"])))
        .orderBy(desc(iterations.n), desc(iterations.attempt))
        .limit(1);
      return {
        run,
        lastIteration: last ? toIterationRecord(last) : null,
        lastDecided: decided ? toIterationRecord(decided) : null,
        started,
      };
    });
  }

  async commit(
    runId: string,
    epoch: number,
    mutation: RunMutation,
    now: number,
  ): Promise<RunRecord> {
    return this.db.transaction((tx) => this.apply(tx, runId, epoch, mutation, now));
  }

  /** A commit's writes, inside the caller's transaction. */
  private async apply(
    tx: Tx,
    runId: string,
    epoch: number,
    mutation: RunMutation,
    now: number,
  ): Promise<RunRecord> {
    const m = withoutNul(mutation);
    const [row] = await tx.select().from(runs).where(eq(runs.id, runId)).for("update");
    if (!row || row.epoch !== epoch) throw new LeaseLostError(runId, epoch);
    if (m.insertIteration) {
      const { runId: _ignored, ...it } = m.insertIteration;
      await tx.insert(iterations).values({ ...it, runId });
    }
    if (m.updateIteration) {
      const { n, attempt, patch } = m.updateIteration;
      await tx
        .update(iterations)
        .set(patch)
        .where(
          and(eq(iterations.runId, runId), eq(iterations.n, n), eq(iterations.attempt, attempt)),
        );
    }
    if (m.toolCalls && m.toolCalls.length > 0) {
      const [last] = await tx
        .select({ seq: sql<number>`coalesce(max(${toolCalls.seq}), 0)::int` })
        .from(toolCalls)
        .where(eq(toolCalls.runId, runId));
      await tx.insert(toolCalls).values(toolCallRows(m.toolCalls, runId, last?.seq ?? 0, now));
    }
    await writeArtifacts(tx, runId, m);
    await recordPatterns(tx, row.workspace, runId, m, now);
    await appendEvents(tx, runId, m.events ?? [], now);
    // The run's own row last: when this commit finishes the run, the statistics trigger
    // (drizzle-pg/0002) then folds the run with everything written above in one go, and
    // holds its summary rows only for the moment before the commit.
    const set = runRowChanges(row.status as RunRecord["status"], m.run);
    if (Object.keys(set).length === 0) return toRunRecord(row);
    const [updated] = await tx
      .update(runs)
      .set(set)
      .where(and(eq(runs.id, runId), eq(runs.epoch, epoch)))
      .returning();
    if (!updated) throw new LeaseLostError(runId, epoch);
    return toRunRecord(updated);
  }

  async sessionHistory(
    sessionId: string,
    runId: string,
    limit: number,
  ): Promise<SessionRunSummary[]> {
    const earlier = await this.db
      .select()
      .from(runs)
      .where(and(eq(runs.sessionId, sessionId), lt(runs.id, runId)))
      .orderBy(desc(runs.id))
      .limit(limit);
    if (earlier.length === 0) return [];
    // One query for the files of all of them (a round trip per run would add up).
    const writes = await this.db
      .select({ runId: toolCalls.runId, args: toolCalls.args })
      .from(toolCalls)
      .where(
        and(
          inArray(
            toolCalls.runId,
            earlier.map((r) => r.id),
          ),
          eq(toolCalls.isError, false),
          inArray(toolCalls.tool, FILE_WRITERS),
        ),
      )
      .orderBy(asc(toolCalls.runId), asc(toolCalls.seq));
    const filesByRun = new Map<string, Set<string>>();
    for (const w of writes) {
      const path = (w.args as { path?: unknown } | null)?.path;
      if (typeof path !== "string") continue;
      const files = filesByRun.get(w.runId) ?? new Set<string>();
      files.add(path);
      filesByRun.set(w.runId, files);
    }
    return earlier.map((r) => ({
      runId: r.id,
      task: r.task,
      status: r.status,
      reason: r.reason,
      summary: r.summary,
      filesTouched: [...(filesByRun.get(r.id) ?? [])],
    }));
  }

  async toolFailures(runId: string, limit: number): Promise<ToolFailure[]> {
    const rows = await this.db
      .select()
      .from(toolCalls)
      .where(and(eq(toolCalls.runId, runId), eq(toolCalls.isError, true)))
      .orderBy(desc(toolCalls.seq))
      .limit(limit);
    return rows.reverse().map(toToolFailure);
  }

  async failurePatterns(workspace: string, limit: number): Promise<FailurePattern[]> {
    return workspacePatterns(this.db, workspace, limit);
  }

  phaseArtifacts(runId: string): Promise<PhaseArtifact[]> {
    return listPhaseArtifacts(this.db, runId);
  }

  workspaceHeldUntil(run: HeldRun, now: number): Promise<number | null> {
    return workspaceHeldUntil(this.db, run, now);
  }

  holdWorkspaceFor(
    run: Pick<RunRecord, "id" | "workspace" | "sessionId">,
    now: number,
    ttlMs: number,
  ): Promise<WorkspaceHold> {
    return holdWorkspace(this.db, ownRollbackHold(run, now, ttlMs));
  }

  releaseWorkspaceOf(run: Pick<RunRecord, "id" | "workspace" | "sessionId">): Promise<void> {
    return releaseWorkspace(this.db, ownRollbackHolder(run));
  }

  /** A transaction is all or nothing and fenced by the epoch: the step may simply try again. */
  isUnavailable(error: unknown): boolean {
    return isPgUnavailable(error);
  }

  async hasSnapshot(runId: string, n: number, attempt: number): Promise<boolean> {
    const [row] = await this.db
      .select({ n: iterationSnapshots.n })
      .from(iterationSnapshots)
      .where(
        and(
          eq(iterationSnapshots.runId, runId),
          eq(iterationSnapshots.n, n),
          eq(iterationSnapshots.attempt, attempt),
        ),
      );
    return row !== undefined;
  }

  async getRun(runId: string): Promise<RunRecord | null> {
    const [row] = await this.db.select().from(runs).where(eq(runs.id, runId));
    return row ? toRunRecord(row) : null;
  }
}
