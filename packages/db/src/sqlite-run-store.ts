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
import { and, desc, eq, inArray, lt, sql } from "drizzle-orm";
import { listPhaseArtifacts } from "./artifact-queries";
import { writeArtifacts } from "./artifact-writes";
import type { Db } from "./connection";
import { appendEvents } from "./event-log";
import { recordPatterns, workspacePatterns } from "./failure-patterns";
import { preparedOnce, ShapedStatements } from "./prepared";
import { toIterationRecord, toolCallRows, toRunRecord, toToolFailure } from "./records";
import { iterationSnapshots, iterations, runs, toolCalls } from "./schema";
import {
  type HeldRun,
  holdWorkspace,
  ownRollbackHold,
  ownRollbackHolder,
  releaseWorkspace,
  workspaceHeldUntil,
} from "./workspace-holds";

const FILE_WRITERS = ["write_file", "edit_file"];

const p = (name: string) => sql.placeholder(name);

/** The engine's writes on every iteration, prepared once per connection (see prepared.ts). */
function storeStatements(db: Db) {
  return {
    run: db
      .select()
      .from(runs)
      .where(eq(runs.id, p("id")))
      .prepare(),
    /** What a commit checks before it writes: a full row (and its JSON) is read once, after. */
    runHead: db
      .select({ epoch: runs.epoch, status: runs.status, workspace: runs.workspace })
      .from(runs)
      .where(eq(runs.id, p("id")))
      .prepare(),
    bumpEpoch: db
      .update(runs)
      .set({ epoch: p("epoch") } as never)
      .where(eq(runs.id, p("id")))
      .returning()
      .prepare(),
    lastIteration: db
      .select()
      .from(iterations)
      .where(eq(iterations.runId, p("runId")))
      .orderBy(desc(iterations.n), desc(iterations.attempt))
      .limit(1)
      .prepare(),
    lastDecided: db
      .select()
      .from(iterations)
      .where(
        and(eq(iterations.runId, p("runId")), inArray(iterations.status, ["passed", "failed"])),
      )
      .orderBy(desc(iterations.n), desc(iterations.attempt))
      .limit(1)
      .prepare(),
    snapshotStored: db
      .select({ n: iterationSnapshots.n })
      .from(iterationSnapshots)
      .where(
        and(
          eq(iterationSnapshots.runId, p("runId")),
          eq(iterationSnapshots.n, p("n")),
          eq(iterationSnapshots.attempt, p("attempt")),
        ),
      )
      .prepare(),
    updateRun: new ShapedStatements((set) =>
      db
        .update(runs)
        .set(set as never)
        .where(and(eq(runs.id, p("__id")), eq(runs.epoch, p("__epoch"))))
        .returning()
        .prepare(),
    ),
    insertIteration: new ShapedStatements((set) =>
      db
        .insert(iterations)
        .values(set as never)
        .prepare(),
    ),
    updateIteration: new ShapedStatements((set) =>
      db
        .update(iterations)
        .set(set as never)
        .where(
          and(
            eq(iterations.runId, p("__runId")),
            eq(iterations.n, p("__n")),
            eq(iterations.attempt, p("__attempt")),
          ),
        )
        .prepare(),
    ),
  };
}

/** The engine's RunStore on SQLite: every call is one `BEGIN IMMEDIATE` transaction. */
export class SqliteRunStore implements RunStore {
  constructor(private readonly db: Db) {}

  async claimRun(runId: string, start?: ClaimStart): Promise<ClaimedRun | null> {
    const st = preparedOnce(this.db, storeStatements);
    return this.db.transaction(
      () => {
        const row = st.run.get({ id: runId });
        if (!row) return null;
        let run = toRunRecord(row);
        if (!isTerminal(run.status)) {
          const updated = st.bumpEpoch.get({ id: runId, epoch: run.epoch + 1 });
          if (!updated) throw new Error(`run ${runId} vanished while being claimed`);
          run = toRunRecord(updated);
        }
        let started = false;
        if (start && startsOnClaim(run) && workspaceHeldUntil(this.db, run, start.now) === null) {
          started = true;
          run = this.apply(runId, run.epoch, start.mutation(run), start.now);
        }
        const last = st.lastIteration.get({ runId });
        const decided = st.lastDecided.get({ runId });
        return {
          run,
          lastIteration: last ? toIterationRecord(last) : null,
          lastDecided: decided ? toIterationRecord(decided) : null,
          started,
        };
      },
      { behavior: "immediate" },
    );
  }

  async commit(runId: string, epoch: number, m: RunMutation, now: number): Promise<RunRecord> {
    return this.db.transaction(() => this.apply(runId, epoch, m, now), {
      behavior: "immediate",
    });
  }

  /** A commit's writes, inside the caller's transaction (one connection: `this.db` is in it). */
  private apply(runId: string, epoch: number, m: RunMutation, now: number): RunRecord {
    const st = preparedOnce(this.db, storeStatements);
    const head = st.runHead.get({ id: runId });
    if (!head || head.epoch !== epoch) throw new LeaseLostError(runId, epoch);
    let result: typeof runs.$inferSelect | undefined;
    const set = runRowChanges(head.status as RunRecord["status"], m.run);
    if (Object.keys(set).length > 0) {
      const { statement, params } = st.updateRun.for(set);
      const updated = statement.get({ ...params, __id: runId, __epoch: epoch });
      if (!updated) throw new LeaseLostError(runId, epoch);
      result = updated;
    }
    if (m.insertIteration) {
      const { runId: _ignored, ...it } = m.insertIteration;
      const { statement, params } = st.insertIteration.for({ ...it, runId });
      statement.run(params);
    }
    if (m.updateIteration) {
      const { n, attempt, patch } = m.updateIteration;
      const { statement, params } = st.updateIteration.for(patch);
      statement.run({ ...params, __runId: runId, __n: n, __attempt: attempt });
    }
    if (m.toolCalls && m.toolCalls.length > 0) {
      const last = this.db
        .select({ seq: sql<number>`coalesce(max(${toolCalls.seq}), 0)` })
        .from(toolCalls)
        .where(eq(toolCalls.runId, runId))
        .get();
      this.db
        .insert(toolCalls)
        .values(toolCallRows(m.toolCalls, runId, last?.seq ?? 0, now))
        .run();
    }
    writeArtifacts(this.db, runId, m);
    recordPatterns(this.db, head.workspace, runId, m, now);
    appendEvents(this.db, runId, m.events ?? [], now);
    // The rest of the write never touches the run's row.
    result ??= st.run.get({ id: runId });
    if (!result) throw new LeaseLostError(runId, epoch);
    return toRunRecord(result);
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
    return rows.reverse().map(toToolFailure);
  }

  async failurePatterns(workspace: string, limit: number): Promise<FailurePattern[]> {
    return workspacePatterns(this.db, workspace, limit);
  }

  async phaseArtifacts(runId: string): Promise<PhaseArtifact[]> {
    return listPhaseArtifacts(this.db, runId);
  }

  async hasSnapshot(runId: string, n: number, attempt: number): Promise<boolean> {
    const st = preparedOnce(this.db, storeStatements);
    return st.snapshotStored.get({ runId, n, attempt }) !== undefined;
  }

  async workspaceHeldUntil(run: HeldRun, now: number): Promise<number | null> {
    return workspaceHeldUntil(this.db, run, now);
  }

  async holdWorkspaceFor(
    run: Pick<RunRecord, "id" | "workspace" | "sessionId">,
    now: number,
    ttlMs: number,
  ): Promise<WorkspaceHold> {
    return holdWorkspace(this.db, ownRollbackHold(run, now, ttlMs));
  }

  async releaseWorkspaceOf(run: Pick<RunRecord, "id" | "workspace" | "sessionId">): Promise<void> {
    releaseWorkspace(this.db, ownRollbackHolder(run));
  }

  async getRun(runId: string): Promise<RunRecord | null> {
    const row = this.db.select().from(runs).where(eq(runs.id, runId)).get();
    return row ? toRunRecord(row) : null;
  }
}
