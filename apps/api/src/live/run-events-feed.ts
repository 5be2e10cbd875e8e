import { type EventRecord, isTerminal, type RunRecord } from "@looprun/core";
import type { RunRepositoryPort } from "@looprun/db";

/** Events a run's poller, and a stream's catch-up, read at once. */
export const EVENTS_PAGE = 500;

export interface RunEventsFeedOptions {
  repo: Pick<RunRepositoryPort, "getRun" | "listEvents">;
  pollMs: number;
  /** Events read per poll at most. */
  page: number;
}

/**
 * What one poll of a run read: the run, then its events with `from < seq` (at most a page). Or,
 * with `run` undefined and no events: the poller moved on to `from` after a stream's own read.
 */
export interface RunEventsNews {
  /** Undefined: not read (the poller moved on without a poll, see `seen`). */
  run: RunRecord | null | undefined;
  /** The seq the poll read after: a subscriber that has seen less must read the gap itself. */
  from: number;
  events: EventRecord[];
  /** Fewer events than a page: nothing was left after them when the poll read. */
  complete: boolean;
}

type Listener = (news: RunEventsNews) => void;

/** One run's poller, shared by every stream of that run in this process. */
interface Poller {
  listeners: Set<Listener>;
  /** The highest seq read so far. */
  after: number;
  timer: NodeJS.Timeout;
  polling: boolean;
}

/**
 * New events of runs, for event streams. Workers write them from other processes (and hosts),
 * so they are polled — once per run per API process, however many streams follow that run, not
 * once per stream: each poll is a read on the event loop (synchronous with SQLite). A poll
 * still reading when the next is due lets that one pass.
 */
export class RunEventsFeed {
  private readonly pollers = new Map<string, Poller>();

  constructor(private readonly opts: RunEventsFeedOptions) {}

  /**
   * Calls `listener` with what each poll of run `runId` finds (new events, or the run ended);
   * a new poller starts reading after `after`. Returns the unsubscribe function.
   */
  subscribe(runId: string, after: number, listener: Listener): () => void {
    let poller = this.pollers.get(runId);
    if (!poller) {
      const timer = setInterval(() => this.tick(runId), this.opts.pollMs);
      timer.unref();
      poller = { listeners: new Set(), after, timer, polling: false };
      this.pollers.set(runId, poller);
    }
    const mine = poller;
    mine.listeners.add(listener);
    return () => {
      mine.listeners.delete(listener);
      if (mine.listeners.size === 0 && this.pollers.get(runId) === mine) {
        clearInterval(mine.timer);
        this.pollers.delete(runId);
      }
    };
  }

  /**
   * A stream of run `runId` has read its events up to `seq` from the database itself: the
   * poller need not read them again (a stream behind that mark reads its gap itself).
   */
  seen(runId: string, seq: number): void {
    const poller = this.pollers.get(runId);
    if (!poller || seq <= poller.after) return;
    poller.after = seq;
    // Its next poll reads after `seq`: a stream that has seen less must read the gap itself, and
    // is told now — not by the next poll that finds something, which may come much later.
    const moved: RunEventsNews = { run: undefined, from: seq, events: [], complete: false };
    for (const listener of [...poller.listeners]) listener(moved);
  }

  private tick(runId: string): void {
    const poller = this.pollers.get(runId);
    if (!poller || poller.polling) return;
    poller.polling = true;
    this.poll(poller, runId).finally(() => {
      poller.polling = false;
    });
  }

  private async poll(poller: Poller, runId: string): Promise<void> {
    let run: RunRecord | null;
    let news: RunEventsNews;
    try {
      // The run before its events: when it is already finished, its run_finished event
      // (written in the same transaction) is in the page read next.
      run = await this.opts.repo.getRun(runId);
      const from = poller.after;
      const events = await this.opts.repo.listEvents(runId, from, this.opts.page);
      news = { run, from, events, complete: events.length < this.opts.page };
    } catch {
      return; // A busy or closed database: try again at the next tick.
    }
    const last = news.events.at(-1);
    // Never back: a stream may have moved it on meanwhile (see `seen`).
    if (last) poller.after = Math.max(poller.after, last.seq);
    const ended = run === null || isTerminal(run.status);
    if (!last && !ended) return;
    for (const listener of [...poller.listeners]) listener(news);
  }
}
