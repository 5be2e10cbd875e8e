import { type EventRecord, isTerminal, type RunRecord } from "@looprun/core";
import { Hono } from "hono";
import { z } from "zod";
import type { AppDeps } from "../app-deps";
import { invalidRequest, notFound } from "../errors";
import { EVENTS_PAGE, type RunEventsFeed, type RunEventsNews } from "../live/run-events-feed";
import type { RunFeed } from "../live/run-feed";
import { type LiveOptions, streamSession } from "../live/sse-session";
import { presentEvent, presentRun } from "../presenters";
import { parseQuery, queryInt } from "../request-parsing";

export const EventsStreamQuery = z.strictObject({
  /** Replay from after this seq (exclusive); a `Last-Event-ID` header wins over it. */
  after: queryInt(z.number().int().min(0)).optional(),
});

export const RunsStreamQuery = z.strictObject({
  /** Only runs of this session. */
  sessionId: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, "must match [A-Za-z0-9_-]{1,64}")
    .optional(),
  /** Only this run. */
  runId: z.string().min(1).max(64).optional(),
});

function lastEventId(header: string | undefined): number | undefined {
  if (header === undefined || header.trim() === "") return undefined;
  if (!/^\d+$/.test(header.trim())) {
    throw invalidRequest([{ path: "Last-Event-ID", message: "must be the seq of an event" }]);
  }
  return Number(header.trim());
}

/** Server-sent events: a run's events as they are written, and every run's changes for list views. */
export function liveRoutes(
  deps: AppDeps,
  feeds: { runs: RunFeed; events: RunEventsFeed },
  live: LiveOptions,
): Hono {
  const app = new Hono();
  const now = deps.now ?? Date.now;
  const { runs: feed, events } = feeds;

  app.get("/stream", async (c) => {
    const q = parseQuery(c, RunsStreamQuery);
    // Run ids come from the API: one it never gave is a mistake, as on the run's own stream.
    if (q.runId !== undefined && (await deps.repo.getRun(q.runId)) === null) {
      throw notFound(`run ${q.runId}`);
    }
    const wanted = (run: RunRecord) =>
      (q.sessionId === undefined || run.sessionId === q.sessionId) &&
      (q.runId === undefined || run.id === q.runId);
    return streamSession(c, live, deps.shutdown, async (session) => {
      // The latest change of each run not yet sent: a client that reads slowly (or not at all)
      // skips the states it missed instead of making the server hold every one of them, so what
      // waits is bounded by the number of runs, not by how long the client has stalled.
      const pending = new Map<string, RunRecord>();
      const unsubscribe = feed.subscribe((run) => {
        if (!wanted(run)) return;
        pending.delete(run.id);
        pending.set(run.id, run);
        session.wake();
      });
      try {
        // The stream opens (`retry:`) once the feed has its baseline: from then on, no change
        // is taken for the state the client already has.
        await feed.ready();
        await session.start();
        while (session.open) {
          for (const [id, run] of pending) {
            pending.delete(id);
            await session.send("run_updated", presentRun(run, now()));
          }
          await session.idle();
        }
      } finally {
        unsubscribe();
      }
    });
  });

  app.get("/:id/events/stream", async (c) => {
    const q = parseQuery(c, EventsStreamQuery);
    const id = c.req.param("id");
    const found = await deps.repo.getRun(id);
    if (!found) throw notFound(`run ${id}`);
    let last = lastEventId(c.req.header("last-event-id")) ?? q.after ?? 0;
    // A finished run's events after `last` are all there is: read now, for the replay too.
    const finished = isTerminal(found.status)
      ? await deps.repo.listEvents(id, last, EVENTS_PAGE)
      : null;
    // Nothing after `last`: 204 is how SSE tells an EventSource to stop reconnecting (a 200
    // that only ends would have it come back every `retry` forever).
    if (finished?.length === 0) return c.body(null, 204);
    return streamSession(c, live, deps.shutdown, async (session) => {
      await session.start();
      /**
       * Sends the events of `page` after `last`; true when `run_finished` was among them (the
       * stream ends). What the page holds after it goes too: a rollback of the finished run.
       */
      const send = async (page: EventRecord[]) => {
        let ended = false;
        for (const event of page) {
          if (event.seq <= last) continue;
          await session.send(event.type, presentEvent(event), event.seq);
          last = event.seq;
          if (event.type === "run_finished") ended = true;
        }
        return ended;
      };
      // A finished run: all its events after `last`, page by page (a rollback of the finished
      // run comes after run_finished), and nothing to wait for (no poller).
      if (finished) {
        let page = finished;
        while (session.open) {
          await send(page);
          if (page.length < EVENTS_PAGE) return;
          page = await deps.repo.listEvents(id, last, EVENTS_PAGE);
        }
        return;
      }
      // The route's read of the run (before its events) serves the first pass.
      let known: RunRecord | null = found;
      /** Reads the database up to the last event; true when nothing more can come. */
      const catchUp = async () => {
        while (session.open) {
          // The run before its events: when it is already finished, its run_finished event
          // (written in the same transaction) is in the page read next.
          const run = known ?? (await deps.repo.getRun(id));
          known = null;
          const page = await deps.repo.listEvents(id, last, EVENTS_PAGE);
          // Read here: the run's poller goes on after them instead of reading them again.
          const end = page.at(-1);
          if (end) events.seen(id, end.seq);
          if (await send(page)) return true;
          if (page.length < EVENTS_PAGE) return !run || isTerminal(run.status);
        }
        return true;
      };
      // The run's one poller in this process, joined before the database is read: every poll
      // after that read reaches this stream (a poller joined later may already have read past
      // it, and tells only what it reads next). Only its latest news is kept, and a gap that
      // leaves (a slow client) is read from the database again.
      let news: RunEventsNews | null = null;
      const take = (): RunEventsNews | null => {
        const taken = news;
        news = null;
        return taken;
      };
      const unsubscribe = events.subscribe(id, last, (n) => {
        news = n;
        session.wake();
      });
      try {
        if (await catchUp()) return;
        while (session.open) {
          const n = take();
          if (n === null) {
            await session.idle();
          } else if (n.from > last) {
            if (await catchUp()) return;
          } else {
            if (await send(n.events)) return;
            // (A poller that moved on without a poll read no run: `undefined`, never the end.)
            if (n.complete && (n.run === null || (n.run && isTerminal(n.run.status)))) return;
          }
        }
      } finally {
        unsubscribe();
      }
    });
  });

  return app;
}
