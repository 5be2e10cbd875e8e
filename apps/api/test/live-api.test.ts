import { getEventListeners } from "node:events";
import { describe, expect, it, vi } from "vitest";
import { ENGINES } from "./api-harness";
import { event, liveApi, withMethod } from "./live-harness";
import { payload, type SseMessage, SseReader } from "./sse-client";

describe.each(ENGINES)("live streams over app.request() on %s", (engine) => {
  const live = liveApi(engine);
  const { submit, claim, open, start, finish, json, allEvents } = live;

  it("replays, follows new events as they are written, and ends after run_finished", async () => {
    const { id } = await submit();
    const sse = await open(`/api/runs/${id}/events/stream`);
    const first = await sse.until((m) => m.id === "1");
    expect(first.map((m) => [m.id, m.event])).toEqual([["1", "run_queued"]]);

    const epoch = await claim(id);
    await start(id, epoch);
    await live.store.commit(
      id,
      epoch,
      { events: [event("iteration_started", { iteration: 1, attempt: 1 })] },
      Date.now(),
    );
    const more = await sse.until((m) => m.id === "3");
    expect(more.map((m) => [m.id, m.event])).toEqual([
      ["2", "run_started"],
      ["3", "iteration_started"],
    ]);

    await finish(id, epoch);
    const rest = await sse.rest();
    expect(rest.map((m) => [m.id, m.event])).toEqual([["4", "run_finished"]]);
    expect(await sse.next()).toBeNull();
    // The data is the event exactly as GET /events shows it.
    expect([...first, ...more, ...rest].map(payload)).toEqual(await allEvents(id));
  });

  it("writes each message as its id, event and data lines, in that order", async () => {
    const { id } = await submit();
    await finish(id, await claim(id));
    const res = await live.app.request(`/api/runs/${id}/events/stream`);
    const text = await res.text();
    const messages = text.split("\n\n").filter((m) => !m.startsWith("retry:") && m !== "");
    expect(
      messages.map((m) => m.split("\n").map((line) => line.slice(0, line.indexOf(":")))),
    ).toEqual([
      ["id", "event", "data"],
      ["id", "event", "data"],
    ]);
    expect(messages[0]).toMatch(/^id: 1\nevent: run_queued\ndata: \{.*\}$/);
    expect(messages[1]).toMatch(/^id: 2\nevent: run_finished\ndata: \{.*\}$/);
  });

  it("lets go of the server's shutdown signal when a stream ends, and ends open streams on it", async () => {
    const shutdown = new AbortController();
    const withShutdown = live.h.appWith({
      live: { pollMs: 20, heartbeatMs: 100 },
      shutdown: shutdown.signal,
    });
    const listeners = () => getEventListeners(shutdown.signal, "abort").length;
    const { id } = await submit();
    // More streams, one after the other, than an AbortSignal's listener limit (10).
    for (let i = 0; i < 12; i++) {
      const path = i % 2 === 0 ? `/api/runs/${id}/events/stream` : "/api/runs/stream";
      const res = await withShutdown.request(path);
      const sse = new SseReader(res.body as ReadableStream<Uint8Array>);
      await sse.next(); // `retry:`: the stream is open
      expect(listeners()).toBe(1);
      await sse.cancel();
      await vi.waitFor(() => expect(listeners(), `after stream ${i + 1}`).toBe(0), {
        timeout: 10_000,
      });
    }
    const open = new SseReader(
      (await withShutdown.request(`/api/runs/${id}/events/stream`))
        .body as ReadableStream<Uint8Array>,
    );
    await open.next();
    shutdown.abort();
    await open.rest();
    expect(await open.next()).toBeNull();
    expect(listeners()).toBe(0);
  });

  it("tells a stream the events another stream of the run read first, without waiting for a later event", async () => {
    // No poll within the test: what reaches the first stream comes from the second one's read.
    const slow = live.h.appWith({ live: { pollMs: 600_000, heartbeatMs: 100 } });
    const { id } = await submit();
    const epoch = await claim(id);
    await start(id, epoch);
    const first = new SseReader(
      (await slow.request(`/api/runs/${id}/events/stream`)).body as ReadableStream<Uint8Array>,
    );
    expect((await first.until((m) => m.id === "2")).map((m) => m.event)).toEqual([
      "run_queued",
      "run_started",
    ]);
    // Written after the first stream's read; a second stream reads it from the database.
    await live.store.commit(id, epoch, { events: [event("agent_started")] }, Date.now());
    const second = new SseReader(
      (await slow.request(`/api/runs/${id}/events/stream`)).body as ReadableStream<Uint8Array>,
    );
    await second.until((m) => m.id === "3");
    // The first stream gets it too, now (the run's poller moved on past it for both).
    expect((await first.until((m) => m.id === "3")).map((m) => m.event)).toEqual(["agent_started"]);
    await first.cancel();
    await second.cancel();
  });

  it("resumes after Last-Event-ID (or ?after=) with no gap and no duplicate; the header wins", async () => {
    const { id } = await submit();
    const epoch = await claim(id);
    await start(id, epoch);
    await live.store.commit(
      id,
      epoch,
      {
        events: [
          event("iteration_started", { iteration: 1, attempt: 1 }),
          event("agent_started", { iteration: 1 }),
        ],
      },
      Date.now(),
    );
    await finish(id, epoch);
    const seqs = async (path: string, headers: Record<string, string> = {}) =>
      (await (await open(path, headers)).rest()).map((m: SseMessage) => Number(m.id));

    expect(await seqs(`/api/runs/${id}/events/stream`)).toEqual([1, 2, 3, 4, 5]);
    expect(await seqs(`/api/runs/${id}/events/stream`, { "Last-Event-ID": "2" })).toEqual([
      3, 4, 5,
    ]);
    expect(await seqs(`/api/runs/${id}/events/stream?after=3`)).toEqual([4, 5]);
    expect(await seqs(`/api/runs/${id}/events/stream?after=1`, { "Last-Event-ID": "4" })).toEqual([
      5,
    ]);
  });

  it("answers 204 to a reconnect after the end of a finished run, so that an EventSource stops coming back", async () => {
    const { id } = await submit();
    const epoch = await claim(id);
    const running = await open(`/api/runs/${id}/events/stream`);
    await running.until((m) => m.id === "1");
    // While the run is active, a client that has seen everything waits on an open stream.
    const waiting = await live.app.request(`/api/runs/${id}/events/stream`, {
      headers: { "Last-Event-ID": "1" },
    });
    expect(waiting.status).toBe(200);
    await waiting.body?.cancel();

    await finish(id, epoch);
    expect((await running.rest()).map((m) => m.event)).toEqual(["run_finished"]);
    // What an EventSource does next: reconnect with the last id it saw.
    const again = await live.app.request(`/api/runs/${id}/events/stream`, {
      headers: { "Last-Event-ID": "2" },
    });
    expect(again.status).toBe(204);
    expect(await again.text()).toBe("");
    const past = await live.app.request(`/api/runs/${id}/events/stream?after=9`);
    expect(past.status).toBe(204);
    // Events it has not seen yet (a rollback after the end, here) are still streamed.
    const before = await open(`/api/runs/${id}/events/stream`, { "Last-Event-ID": "1" });
    expect((await before.rest()).map((m) => m.id)).toEqual(["2"]);
  });

  it("replays a finished run's events after run_finished too (a rollback of the finished run)", async () => {
    const { id } = await submit();
    const epoch = await claim(id);
    await start(id, epoch);
    await finish(id, epoch);
    await live.repo.recordRollback(id, { iteration: 0 }, Date.now());
    const stored: { seq: number; type: string }[] = await allEvents(id);
    expect(stored.map((e) => e.type).slice(-2)).toEqual(["run_finished", "rollback_applied"]);
    // From the start, and from just before run_finished: everything stored, then the end.
    for (const after of [0, stored.length - 2]) {
      const sse = await open(`/api/runs/${id}/events/stream`, { "Last-Event-ID": String(after) });
      const all = await sse.rest();
      expect(all.map(payload)).toEqual(stored.filter((e) => e.seq > after));
      expect(await sse.next()).toBeNull();
    }
  });

  it("pings while idle", async () => {
    const { id } = await submit();
    const sse = await open(`/api/runs/${id}/events/stream`, { "Last-Event-ID": "1" });
    let m = await sse.next();
    while (m && m.comment !== "ping") m = await sse.next();
    expect(m).toEqual({ comment: "ping" });
    await sse.cancel();
  });

  it("answers 404 not_found (JSON) for an unknown run and 400 for a bad Last-Event-ID, before streaming", async () => {
    const missing = await live.app.request("/api/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/events/stream");
    expect(missing.status).toBe(404);
    expect(missing.headers.get("content-type")).toContain("application/json");
    expect((await json(missing)).error.code).toBe("not_found");

    const { id } = await submit();
    const bad = await live.app.request(`/api/runs/${id}/events/stream`, {
      headers: { "Last-Event-ID": "x" },
    });
    expect(bad.status).toBe(400);
    expect((await json(bad)).error).toMatchObject({
      code: "invalid_request",
      issues: [{ path: "Last-Event-ID" }],
    });
    const unknownParam = await live.app.request(`/api/runs/${id}/events/stream?foo=1`);
    expect(unknownParam.status).toBe(400);
  });

  it("streams run_updated with the run's view when a run is created or changes", async () => {
    const sse = await open("/api/runs/stream");
    // `retry:`: the stream is open (the feed has its baseline); a run submitted before that
    // could be taken for the state the client already has.
    await sse.next();
    const { id } = await submit({ sessionId: "live-list" });
    const queued = await sse.until((m) => payload(m).id === id);
    expect(queued.at(-1)).toMatchObject({ event: "run_updated" });
    expect(payload(queued.at(-1) as SseMessage)).toMatchObject({
      id,
      status: "queued",
      sessionId: "live-list",
    });

    const epoch = await claim(id);
    await live.store.commit(
      id,
      epoch,
      { run: { status: "running", startedAt: Date.now(), progress: "working" } },
      Date.now(),
    );
    const running = await sse.until((m) => payload(m).id === id && payload(m).status === "running");
    expect(payload(running.at(-1) as SseMessage)).toMatchObject({
      progress: "working",
      iteration: 0,
    });

    // A progress change alone (no event) is a change too.
    await live.store.commit(id, epoch, { run: { progress: "validating" } }, Date.now());
    await sse.until((m) => payload(m).id === id && payload(m).progress === "validating");
    await finish(id, epoch);
    const done = await sse.until((m) => payload(m).id === id && payload(m).status === "succeeded");
    expect(payload(done.at(-1) as SseMessage)).toMatchObject({
      reason: "success",
      finishedAt: expect.any(String),
    });
    await sse.cancel();
  });

  it("filters the runs stream by runId and sessionId", async () => {
    const a = await submit({ sessionId: "live-a" });
    const sse = await open(`/api/runs/stream?runId=${a.id}`);
    const bySession = await open("/api/runs/stream?sessionId=live-b");
    await sse.next(); // `retry:`: open
    await bySession.next();
    const b = await submit({ sessionId: "live-b" });
    await live.store.commit(a.id, await claim(a.id), { run: { progress: "a moves" } }, Date.now());
    const seen = await sse.until((m) => payload(m).progress === "a moves");
    expect(seen.every((m) => payload(m).id === a.id)).toBe(true);
    const other = await bySession.until((m) => payload(m).id === b.id);
    expect(other.every((m) => payload(m).sessionId === "live-b")).toBe(true);
    await sse.cancel();
    await bySession.cancel();
  });

  it("answers 404 for a runs stream of a run that does not exist (a session may not exist yet)", async () => {
    const res = await live.app.request("/api/runs/stream?runId=01NOSUCHRUN0000000000000000");
    expect(res.status).toBe(404);
    expect((await json(res)).error.code).toBe("not_found");
    // A session's stream may be opened before its first run is submitted.
    const early = await open("/api/runs/stream?sessionId=live-not-yet");
    await early.cancel();
  });

  it("tells a change made right after the runs stream opened, however slow the feed's first read", async () => {
    const slow = withMethod(live.h.repo, "liveRuns", (liveRuns) => async (...args) => {
      await new Promise((r) => setTimeout(r, 300));
      return liveRuns(...args);
    });
    const slowApp = live.h.appWith({ repo: slow, live: { pollMs: 20, heartbeatMs: 60_000 } });
    const { id } = await submit({ sessionId: "live-baseline" });
    const res = await slowApp.request(`/api/runs/stream?runId=${id}`);
    const sse = new SseReader(res.body as ReadableStream<Uint8Array>);
    await sse.next(); // `retry:`: the stream is open
    await live.store.commit(id, await claim(id), { run: { progress: "right after" } }, Date.now());
    const told = await Promise.race([
      sse.until((m) => payload(m).progress === "right after"),
      new Promise<null>((r) => setTimeout(() => r(null), 5000)),
    ]);
    expect(told, "the change never came").not.toBeNull();
    await sse.cancel();
  });

  it("holds only the latest change of each run for a client that stops reading the runs stream", async () => {
    const { id } = await submit({ sessionId: "live-stalled" });
    const stalled = await open(`/api/runs/stream?runId=${id}`);
    await stalled.next(); // `retry:`: subscribed, then it reads nothing more for a while
    const reading = await open(`/api/runs/stream?runId=${id}`);
    const epoch = await claim(id);
    const CHANGES = 30;
    for (let i = 1; i <= CHANGES; i++) {
      await live.store.commit(id, epoch, { run: { progress: `step ${i}` } }, Date.now());
      // Each change goes out on its own (the feed has polled it) before the next one is made.
      await reading.until((m) => payload(m).progress === `step ${i}`);
    }
    const missed = await stalled.until((m) => payload(m).progress === `step ${CHANGES}`);
    // A message or two were under way when it stopped reading; the rest is the latest state.
    expect(missed.length).toBeLessThanOrEqual(4);
    expect(payload(missed.at(-1) as SseMessage)).toMatchObject({ id, progress: `step ${CHANGES}` });
    await stalled.cancel();
    await reading.cancel();
  });

  it("needs the bearer token when API_TOKEN is set", async () => {
    const token = "live-token-0123456789";
    const secured = live.h.appWith({
      apiToken: token,
    });
    const { id } = await submit();
    const anonymous = await secured.request(`/api/runs/${id}/events/stream`);
    expect(anonymous.status).toBe(401);
    const runs = await secured.request("/api/runs/stream");
    expect(runs.status).toBe(401);
    const res = await secured.request(`/api/runs/${id}/events/stream`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(200);
    const sse = new SseReader(res.body as ReadableStream<Uint8Array>);
    expect((await sse.until(() => true))[0]).toMatchObject({ id: "1", event: "run_queued" });
    await sse.cancel();
  });
});
