import { isActive, type RunRecord } from "@looprun/core";
import type { RunRepositoryPort } from "@looprun/db";
import { encodeTime } from "ulid";

/** How far back the feed looks for runs created between two polls (covers clock skew between API instances). */
const CREATED_WINDOW_MS = 5 * 60_000;

export interface RunFeedOptions {
  repo: Pick<RunRepositoryPort, "liveRuns">;
  /** @defaultValue 250 */
  pollMs?: number;
  /** @defaultValue Date.now */
  now?: () => number;
}

type Listener = (run: RunRecord) => void;

/** What a list view shows of a run: when any of it changes, the run is sent again. */
function fingerprint(run: RunRecord): string {
  return JSON.stringify([
    run.status,
    run.reason,
    run.summary,
    run.iteration,
    run.progress,
    run.metrics,
    run.latestReviewId,
    run.startedAt,
    run.finishedAt,
  ]);
}

/**
 * Changes of runs, for list views. Workers write runs into the database from other processes
 * (and hosts), so one poller per API process compares what it reads with what it saw last, and
 * fans the changed runs out to every subscriber. It runs only while someone listens; a poll
 * that is still reading when the next is due lets that one pass.
 */
export class RunFeed {
  private readonly listeners = new Set<Listener>();
  /** id → fingerprint of every run returned by the last poll; active ones are re-read next time. */
  private seen = new Map<string, { fingerprint: string; active: boolean }>();
  private timer: NodeJS.Timeout | null = null;
  /** The poll under way, if any. */
  private polling: Promise<void> | null = null;
  /** The silent first poll of the current subscriptions: what changes are told against. */
  private baseline: Promise<void> = Promise.resolve();
  /** Bumped by `stop()`: a poll that was under way then does not touch the new state. */
  private generation = 0;
  private readonly pollMs: number;
  private readonly now: () => number;

  constructor(private readonly opts: RunFeedOptions) {
    this.pollMs = opts.pollMs ?? 250;
    this.now = opts.now ?? Date.now;
  }

  /** Calls `listener` with each run that changes from now on; returns the unsubscribe function. */
  subscribe(listener: Listener): () => void {
    if (this.listeners.size === 0) {
      // A silent first poll: subscribers get changes, the current state comes from GET /api/runs.
      // A poll of an earlier subscription may still be reading: it is ignored (generation).
      this.polling = null;
      this.tick(false);
      this.baseline = this.polling ?? Promise.resolve();
      this.timer = setInterval(() => this.tick(true), this.pollMs);
      this.timer.unref();
    }
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.stop();
    };
  }

  /**
   * Resolves once the feed knows the state that changes are told against: a change made after
   * that reaches every subscriber; one made before may be taken for the current state.
   */
  ready(): Promise<void> {
    return this.baseline;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.seen = new Map();
    this.generation += 1;
  }

  private tick(emit: boolean): void {
    if (this.polling) return;
    const polling = this.poll(emit).finally(() => {
      if (this.polling === polling) this.polling = null;
    });
    this.polling = polling;
  }

  private async poll(emit: boolean): Promise<void> {
    const generation = this.generation;
    const watched = [...this.seen].filter(([, s]) => s.active).map(([id]) => id);
    const sinceId = `${encodeTime(Math.max(0, this.now() - CREATED_WINDOW_MS), 10)}${"0".repeat(16)}`;
    let runs: RunRecord[];
    try {
      runs = await this.opts.repo.liveRuns(watched, sinceId);
    } catch {
      return; // A busy or closed database: try again at the next tick.
    }
    if (generation !== this.generation) return;
    const next = new Map<string, { fingerprint: string; active: boolean }>();
    const changed: RunRecord[] = [];
    for (const run of runs) {
      const print = fingerprint(run);
      next.set(run.id, { fingerprint: print, active: isActive(run.status) });
      if (this.seen.get(run.id)?.fingerprint !== print) changed.push(run);
    }
    this.seen = next;
    if (!emit) return;
    changed.sort((a, b) => (a.id < b.id ? -1 : 1));
    for (const run of changed) {
      for (const listener of this.listeners) listener(run);
    }
  }
}
