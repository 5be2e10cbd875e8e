import type { SessionRunSummary, ToolFailure } from "../agents/session-context";
import { type PhaseArtifact, PIPELINE_PHASES, type ReviewArtifact } from "../domain/artifacts";
import type { EventRecord } from "../domain/events";
import { type IterationRecord, isActive, type NewToolCall, type RunRecord } from "../domain/run";
import type { IterationSnapshot, RunChange } from "../domain/snapshots";
import {
  type ClaimedRun,
  type ClaimStart,
  type RunMutation,
  type RunStore,
  runRowChanges,
  startsOnClaim,
  type WorkspaceHold,
} from "../engine/run-store";
import { promptCandidates } from "../learning/pattern-advice";
import {
  type FailurePattern,
  foldPattern,
  observationsOf,
  patternDeltas,
  patternKey,
} from "../learning/patterns";
import { LeaseLostError } from "../util/errors";

const FILE_WRITERS = new Set(["write_file", "edit_file"]);

/** A RunStore in memory, for the engine's unit tests. Same semantics as the SQLite store. */
export class MemoryRunStore implements RunStore {
  readonly runs = new Map<string, RunRecord>();
  readonly iterations: IterationRecord[] = [];
  readonly events: EventRecord[] = [];
  readonly toolCalls: (NewToolCall & { runId: string; seq: number })[] = [];
  readonly reviews: ReviewArtifact[] = [];
  readonly snapshots: IterationSnapshot[] = [];
  readonly changes = new Map<string, RunChange>();
  readonly phaseArtifactList: PhaseArtifact[] = [];
  /** Failure patterns by workspace, then by pattern key. */
  readonly patterns = new Map<string, Map<string, FailurePattern>>();

  add(run: RunRecord): void {
    this.runs.set(run.id, structuredClone(run));
  }

  iterationsOf(runId: string): IterationRecord[] {
    return this.iterations
      .filter((i) => i.runId === runId)
      .sort((a, b) => a.n - b.n || a.attempt - b.attempt);
  }

  eventsOf(runId: string): EventRecord[] {
    return this.events.filter((e) => e.runId === runId);
  }

  reviewsOf(runId: string): ReviewArtifact[] {
    return this.reviews.filter((r) => r.runId === runId);
  }

  async hasSnapshot(runId: string, n: number, attempt: number): Promise<boolean> {
    return this.snapshots.some((s) => s.runId === runId && s.n === n && s.attempt === attempt);
  }

  snapshotsOf(runId: string): IterationSnapshot[] {
    return this.snapshots.filter((s) => s.runId === runId);
  }

  async claimRun(runId: string, start?: ClaimStart): Promise<ClaimedRun | null> {
    const run = this.runs.get(runId);
    if (!run) return null;
    if (!["succeeded", "failed", "stopped"].includes(run.status)) run.epoch += 1;
    let started = false;
    if (start && startsOnClaim(run) && (await this.workspaceHeldUntil(run, start.now)) === null) {
      started = true;
      await this.commit(runId, run.epoch, start.mutation(structuredClone(run)), start.now);
    }
    const its = this.iterationsOf(runId);
    const decided = its.filter((i) => i.status === "passed" || i.status === "failed");
    return {
      run: structuredClone(run),
      lastIteration: structuredClone(its.at(-1) ?? null),
      lastDecided: structuredClone(decided.at(-1) ?? null),
      started,
    };
  }

  async commit(runId: string, epoch: number, m: RunMutation, now: number): Promise<RunRecord> {
    const run = this.runs.get(runId);
    if (!run || run.epoch !== epoch) throw new LeaseLostError(runId, epoch);
    if (m.run) Object.assign(run, runRowChanges(run.status, m.run));
    if (m.insertIteration) {
      const { n, attempt } = m.insertIteration;
      if (this.iterations.some((i) => i.runId === runId && i.n === n && i.attempt === attempt)) {
        throw new Error(`iteration ${n}/${attempt} already recorded`);
      }
      this.iterations.push(structuredClone(m.insertIteration));
    }
    if (m.updateIteration) {
      const { n, attempt, patch } = m.updateIteration;
      const it = this.iterations.find(
        (i) => i.runId === runId && i.n === n && i.attempt === attempt,
      );
      if (it) Object.assign(it, structuredClone(patch));
    }
    if (m.insertReview) this.reviews.push(structuredClone(m.insertReview));
    for (const snapshot of m.insertSnapshots ?? []) {
      const { n, attempt } = snapshot;
      const others = this.snapshots.filter(
        (x) => !(x.runId === runId && x.n === n && x.attempt === attempt),
      );
      this.snapshots.splice(
        0,
        this.snapshots.length,
        ...others,
        structuredClone({ ...snapshot, runId }),
      );
    }
    if (m.change) this.changes.set(runId, structuredClone({ ...m.change, runId }));
    if (m.phaseArtifact) {
      const { phase } = m.phaseArtifact;
      const others = this.phaseArtifactList.filter(
        (a) => !(a.runId === runId && a.phase === phase),
      );
      this.phaseArtifactList.splice(
        0,
        this.phaseArtifactList.length,
        ...others,
        structuredClone({ ...m.phaseArtifact, runId }),
      );
    }
    let callSeq = this.toolCalls.filter((c) => c.runId === runId).length;
    for (const call of m.toolCalls ?? []) {
      callSeq += 1;
      this.toolCalls.push({ ...structuredClone(call), runId, seq: callSeq });
    }
    const deltas = patternDeltas(observationsOf(m));
    if (deltas.length > 0) {
      const known = this.patterns.get(run.workspace) ?? new Map<string, FailurePattern>();
      this.patterns.set(run.workspace, known);
      for (const d of deltas) {
        const key = patternKey(d);
        known.set(key, foldPattern(known.get(key) ?? null, run.workspace, d, runId, now));
      }
    }
    let seq = this.eventsOf(runId).length;
    for (const e of m.events ?? []) {
      seq += 1;
      this.events.push({ runId, seq, at: now, type: e.type, data: structuredClone(e.data) });
    }
    return structuredClone(run);
  }

  async failurePatterns(workspace: string, limit: number): Promise<FailurePattern[]> {
    return promptCandidates([...(this.patterns.get(workspace)?.values() ?? [])], limit).map((p) =>
      structuredClone(p),
    );
  }

  async sessionHistory(
    sessionId: string,
    runId: string,
    limit: number,
  ): Promise<SessionRunSummary[]> {
    return [...this.runs.values()]
      .filter((r) => r.sessionId === sessionId && r.id < runId)
      .sort((a, b) => (a.id < b.id ? 1 : -1))
      .slice(0, limit)
      .map((r) => ({
        runId: r.id,
        task: r.spec.task,
        status: r.status,
        reason: r.reason,
        summary: r.summary,
        filesTouched: [
          ...new Set(
            this.toolCalls
              .filter((c) => c.runId === r.id && !c.isError && FILE_WRITERS.has(c.tool))
              .map((c) => String((c.args as { path?: unknown }).path)),
          ),
        ],
      }));
  }

  async toolFailures(runId: string, limit: number): Promise<ToolFailure[]> {
    return this.toolCalls
      .filter((c) => c.runId === runId && c.isError)
      .slice(-limit)
      .map((c) => ({
        iteration: c.iteration,
        server: c.server,
        tool: c.tool,
        args: c.args,
        error: c.result,
      }));
  }

  async phaseArtifacts(runId: string): Promise<PhaseArtifact[]> {
    return structuredClone(
      this.phaseArtifactList
        .filter((a) => a.runId === runId)
        .sort((a, b) => PIPELINE_PHASES.indexOf(a.phase) - PIPELINE_PHASES.indexOf(b.phase)),
    );
  }

  /** Workspaces (and `session:<id>` keys) held by a rollback, until when (tests set them). */
  readonly holds = new Map<string, number>();

  async workspaceHeldUntil(
    run: Pick<RunRecord, "workspace" | "sessionId">,
    now: number,
  ): Promise<number | null> {
    const until = [this.holds.get(run.workspace), this.holds.get(`session:${run.sessionId}`)]
      .filter((t): t is number => t !== undefined && t > now)
      .sort((a, b) => b - a)[0];
    return until ?? null;
  }

  async holdWorkspaceFor(
    run: Pick<RunRecord, "id" | "workspace" | "sessionId">,
    now: number,
    ttlMs: number,
  ): Promise<WorkspaceHold> {
    const overlap = (a: string, b: string) =>
      a === b || a.startsWith(`${b}/`) || b.startsWith(`${a}/`);
    const active = [...this.runs.values()].find(
      (r) =>
        r.id !== run.id &&
        isActive(r.status) &&
        (r.sessionId === run.sessionId || overlap(r.workspace, run.workspace)),
    );
    if (active) return { held: false, activeRunId: active.id };
    if ((await this.workspaceHeldUntil(run, now)) !== null) return { held: false, heldByRun: "" };
    this.holds.set(run.workspace, now + ttlMs);
    this.holds.set(`session:${run.sessionId}`, now + ttlMs);
    return { held: true };
  }

  async releaseWorkspaceOf(run: Pick<RunRecord, "id" | "workspace" | "sessionId">): Promise<void> {
    this.holds.delete(run.workspace);
    this.holds.delete(`session:${run.sessionId}`);
  }

  async getRun(runId: string): Promise<RunRecord | null> {
    const run = this.runs.get(runId);
    return run ? structuredClone(run) : null;
  }
}
