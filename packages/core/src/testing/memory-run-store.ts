import type { EventRecord } from "../domain/events";
import type { IterationRecord, RunRecord } from "../domain/run";
import { type ClaimedRun, mergeStatus, type RunMutation, type RunStore } from "../engine/run-store";
import { LeaseLostError } from "../util/errors";

/** A RunStore in memory, for the engine's unit tests. Same semantics as the SQLite store. */
export class MemoryRunStore implements RunStore {
  readonly runs = new Map<string, RunRecord>();
  readonly iterations: IterationRecord[] = [];
  readonly events: EventRecord[] = [];

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

  async claimRun(runId: string): Promise<ClaimedRun | null> {
    const run = this.runs.get(runId);
    if (!run) return null;
    if (!["succeeded", "failed", "stopped"].includes(run.status)) run.epoch += 1;
    const its = this.iterationsOf(runId);
    const decided = its.filter((i) => i.status === "passed" || i.status === "failed");
    return {
      run: structuredClone(run),
      lastIteration: structuredClone(its.at(-1) ?? null),
      lastDecided: structuredClone(decided.at(-1) ?? null),
    };
  }

  async commit(runId: string, epoch: number, m: RunMutation, now: number): Promise<RunRecord> {
    const run = this.runs.get(runId);
    if (!run || run.epoch !== epoch) throw new LeaseLostError(runId, epoch);
    if (m.run) {
      const status = mergeStatus(run.status, m.run.status);
      Object.assign(run, m.run, { status });
    }
    if (m.insertIteration) {
      const { n, attempt } = m.insertIteration;
      if (this.iterations.some((i) => i.runId === runId && i.n === n && i.attempt === attempt)) {
        throw new Error(`iteration ${n}/${attempt} already recorded`);
      }
      this.iterations.push(structuredClone(m.insertIteration));
    }
    if (m.updateIteration) {
      const { n, attempt, patch } = m.updateIteration;
      const it = this.iterations.find((i) => i.runId === runId && i.n === n && i.attempt === attempt);
      if (it) Object.assign(it, structuredClone(patch));
    }
    let seq = this.eventsOf(runId).length;
    for (const e of m.events ?? []) {
      seq += 1;
      this.events.push({ runId, seq, at: now, type: e.type, data: structuredClone(e.data) });
    }
    return structuredClone(run);
  }

  async getRun(runId: string): Promise<RunRecord | null> {
    const run = this.runs.get(runId);
    return run ? structuredClone(run) : null;
  }
}
