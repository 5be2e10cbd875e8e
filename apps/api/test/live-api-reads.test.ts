import { describe, expect, it } from "vitest";
import { ENGINES } from "./api-harness";
import { event, liveApi, type Method, withMethod } from "./live-harness";
import { SseReader } from "./sse-client";

// How often the live streams read the store: once per connect, once per poll for all streams.

describe.each(ENGINES)("live streams' reads of the store on %s", (engine) => {
  const live = liveApi(engine);
  const { submit, claim, start, finish } = live;

  it("does not have the run's poller read again the history a new stream reads", async () => {
    const afters: number[] = [];
    const counted = withMethod(live.h.repo, "listEvents", (listEvents) => (...args) => {
      afters.push(Number(args[1]));
      return listEvents(...args);
    });
    // Polls far enough apart that a stream's catch-up (three pages) fits between two.
    const pollMs = 300;
    const shared = live.h.appWith({ repo: counted, live: { pollMs, heartbeatMs: 60_000 } });
    const { id } = await submit();
    const epoch = await claim(id);
    await start(id, epoch);
    const HISTORY = 1200; // three pages of the stream's catch-up (500 a page)
    for (let written = 2; written < HISTORY; written += 200) {
      const batch = Math.min(200, HISTORY - written);
      const progress = Array.from({ length: batch }, () => event("iteration_started"));
      await live.store.commit(id, epoch, { events: progress }, Date.now());
    }
    const res = await shared.request(`/api/runs/${id}/events/stream`);
    const sse = new SseReader(res.body as ReadableStream<Uint8Array>);
    await sse.until((m) => m.id === String(HISTORY));
    // The next polls read from the end on, where the poller would have read the history again
    // a page a poll (one poll may have started during the catch-up).
    await new Promise((r) => setTimeout(r, 2.5 * pollMs));
    expect(afters.filter((after) => after < HISTORY).length).toBeLessThanOrEqual(4);
    expect(afters.filter((after) => after === HISTORY).length).toBeGreaterThanOrEqual(1);
    await finish(id, epoch);
    expect((await sse.rest()).at(-1)?.event).toBe("run_finished");
  });

  it("reads a finished run and its events once for a stream that replays them", async () => {
    const calls: string[] = [];
    const counted = new Proxy(live.h.repo, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target);
        if (typeof value !== "function") return value;
        return (...args: unknown[]) => {
          calls.push(String(prop));
          return (value as Method).apply(target, args);
        };
      },
    });
    const shared = live.h.appWith({ repo: counted, live: { pollMs: 60_000, heartbeatMs: 60_000 } });
    const { id } = await submit();
    const epoch = await claim(id);
    await start(id, epoch);
    await finish(id, epoch);
    const res = await shared.request(`/api/runs/${id}/events/stream`);
    const sse = new SseReader(res.body as ReadableStream<Uint8Array>);
    expect((await sse.rest()).map((m) => m.event)).toEqual([
      "run_queued",
      "run_started",
      "run_finished",
    ]);
    // The route's own reads serve the replay: the run once, its events once.
    expect(calls.filter((c) => c === "getRun")).toHaveLength(1);
    expect(calls.filter((c) => c === "listEvents")).toHaveLength(1);
  });

  it("replays a finished run's long history page by page, to its run_finished", async () => {
    const { id } = await submit();
    const epoch = await claim(id);
    await start(id, epoch);
    const HISTORY = 1200; // more than two pages of 500
    for (let written = 2; written < HISTORY; written += 200) {
      const batch = Math.min(200, HISTORY - written);
      const progress = Array.from({ length: batch }, () => event("iteration_started"));
      await live.store.commit(id, epoch, { events: progress }, Date.now());
    }
    await finish(id, epoch);
    const res = await live.app.request(`/api/runs/${id}/events/stream?after=10`);
    const messages = await new SseReader(res.body as ReadableStream<Uint8Array>).rest();
    expect(messages.map((m) => Number(m.id))).toEqual(
      Array.from({ length: HISTORY + 1 - 10 }, (_, i) => 11 + i),
    );
    expect(messages.at(-1)?.event).toBe("run_finished");
  });

  it("reads a run's events once per poll for all the streams that follow it, not once per stream", async () => {
    let reads = 0;
    const counted = withMethod(live.h.repo, "listEvents", (listEvents) => (...args) => {
      reads++;
      return listEvents(...args);
    });
    const pollMs = 20;
    const shared = live.h.appWith({ repo: counted, live: { pollMs, heartbeatMs: 60_000 } });
    const { id } = await submit();
    const STREAMS = 10;
    const streams: SseReader[] = [];
    for (let i = 0; i < STREAMS; i++) {
      const res = await shared.request(`/api/runs/${id}/events/stream`);
      const sse = new SseReader(res.body as ReadableStream<Uint8Array>);
      await sse.until((m) => m.id === "1");
      streams.push(sse);
    }
    const before = reads;
    const windowMs = 400;
    await new Promise((r) => setTimeout(r, windowMs));
    // One poller: about windowMs / pollMs reads (20), where one per stream made 10 times that.
    expect(reads - before).toBeLessThanOrEqual(windowMs / pollMs + 10);
    // And each stream still gets what is written.
    const epoch = await claim(id);
    await start(id, epoch);
    await finish(id, epoch);
    for (const sse of streams) {
      expect((await sse.rest()).map((m) => m.event)).toEqual(["run_started", "run_finished"]);
    }
  });
});
