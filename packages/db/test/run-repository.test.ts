import { RunAlreadyActiveError } from "@looprun/core";
import { describe, expect, it } from "vitest";
import { freshStoreForEachTest, newRun } from "./support";

const fresh = freshStoreForEachTest();

/** Ends a run the way a worker does: claim, then a fenced commit. */
async function finishRun(runId: string, status: "succeeded" | "failed" = "succeeded") {
  const claimed = (await fresh.store.claimRun(runId))!;
  return fresh.store.commit(
    runId,
    claimed.run.epoch,
    {
      run: { status, reason: status === "succeeded" ? "success" : "error", finishedAt: Date.now() },
      events: [
        {
          type: "run_finished",
          data: { status, budget: { elapsedMs: 0, remainingIterations: 0 } },
        },
      ],
    },
    Date.now(),
  );
}

describe("RunRepository.createRun", () => {
  it("stores a queued run, its session and a run_queued event", () => {
    const input = newRun(
      { maxIterations: 4 },
      { sessionId: "s1", workspace: "/ws/s1", createdAt: 1000 },
    );
    const run = fresh.repo.createRun(input);
    expect(run).toMatchObject({
      id: input.id,
      sessionId: "s1",
      status: "queued",
      reason: null,
      iteration: 0,
      epoch: 0,
      workspace: "/ws/s1",
      createdAt: 1000,
      startedAt: null,
      finishedAt: null,
    });
    expect(run.spec).toEqual(input.spec);
    expect(run.metrics.iterations).toBe(0);
    expect(fresh.repo.getRun(run.id)).toEqual(run);
    expect(fresh.repo.listEvents(run.id, 0, 100)).toEqual([
      {
        runId: run.id,
        seq: 1,
        type: "run_queued",
        at: 1000,
        data: { sessionId: "s1", budget: { elapsedMs: 0, remainingIterations: 4 } },
      },
    ]);
    const session = fresh.repo.getSession("s1");
    expect(session?.session).toEqual({ id: "s1", workspace: "/ws/s1", createdAt: 1000 });
    expect(session?.runs.map((r) => r.id)).toEqual([run.id]);
    expect(fresh.repo.activeRunOf("s1")).toBe(run.id);
  });

  it("refuses a second active run in the session, naming the active one, and stores nothing", () => {
    const first = fresh.repo.createRun(newRun({}, { sessionId: "busy" }));
    const second = newRun({}, { sessionId: "busy" });
    let error: unknown;
    try {
      fresh.repo.createRun(second);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(RunAlreadyActiveError);
    expect(error).toMatchObject({ sessionId: "busy", activeRunId: first.id });
    expect(fresh.repo.getRun(second.id)).toBeNull();
    expect(fresh.repo.listEvents(second.id, 0, 100)).toEqual([]);
    expect(fresh.repo.getSession("busy")?.runs.map((r) => r.id)).toEqual([first.id]);
  });

  it("refuses a second run while the first is running or stopping", async () => {
    const first = fresh.repo.createRun(newRun({}, { sessionId: "s" }));
    const claimed = (await fresh.store.claimRun(first.id))!;
    await fresh.store.commit(
      first.id,
      claimed.run.epoch,
      { run: { status: "running" } },
      Date.now(),
    );
    expect(() => fresh.repo.createRun(newRun({}, { sessionId: "s" }))).toThrow(
      RunAlreadyActiveError,
    );
    fresh.repo.requestStop(first.id, Date.now());
    expect(() => fresh.repo.createRun(newRun({}, { sessionId: "s" }))).toThrow(
      RunAlreadyActiveError,
    );
  });

  it("accepts a new run once the active one has finished, keeping the session", async () => {
    const first = fresh.repo.createRun(newRun({}, { sessionId: "s", workspace: "/first" }));
    await finishRun(first.id);
    const second = fresh.repo.createRun(newRun({}, { sessionId: "s", workspace: "/second" }));
    expect(second.status).toBe("queued");
    expect(fresh.repo.activeRunOf("s")).toBe(second.id);
    const session = fresh.repo.getSession("s")!;
    expect(session.session.workspace).toBe("/first");
    expect(session.runs.map((r) => r.id)).toEqual([second.id, first.id]);
  });

  it("accepts runs of other sessions", () => {
    fresh.repo.createRun(newRun({}, { sessionId: "a" }));
    expect(fresh.repo.createRun(newRun({}, { sessionId: "b" })).status).toBe("queued");
  });

  it("does not turn other constraint errors into RunAlreadyActiveError", () => {
    const input = newRun({}, { sessionId: "dup" });
    fresh.repo.createRun(input);
    let error: unknown;
    try {
      fresh.repo.createRun({ ...input, sessionId: "other" });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(RunAlreadyActiveError);
    expect(fresh.repo.getSession("other")).toBeNull();
  });
});

describe("RunRepository.deleteRun", () => {
  it("removes the run, its events, and its session when it was the session's only run", () => {
    const run = fresh.repo.createRun(newRun({}, { sessionId: "gone" }));
    expect(fresh.repo.deleteRun(run.id)).toBe(true);
    expect(fresh.repo.getRun(run.id)).toBeNull();
    expect(fresh.repo.listEvents(run.id, 0, 100)).toEqual([]);
    expect(fresh.repo.getSession("gone")).toBeNull();
  });

  it("keeps a session that has other runs", async () => {
    const first = fresh.repo.createRun(newRun({}, { sessionId: "kept" }));
    await finishRun(first.id);
    const second = fresh.repo.createRun(newRun({}, { sessionId: "kept" }));
    fresh.repo.deleteRun(second.id);
    expect(fresh.repo.getSession("kept")?.runs.map((r) => r.id)).toEqual([first.id]);
    expect(fresh.repo.deleteRun("no-such-run")).toBe(true);
  });

  it("keeps a run a worker claimed meanwhile (its enqueue reached Redis, the answer did not)", async () => {
    const run = fresh.repo.createRun(newRun({}, { sessionId: "taken" }));
    await fresh.store.claimRun(run.id);
    expect(fresh.repo.deleteRun(run.id)).toBe(false);
    expect(fresh.repo.getRun(run.id)?.id).toBe(run.id);
    expect(fresh.repo.getSession("taken")?.runs.map((r) => r.id)).toEqual([run.id]);
  });
});

describe("RunRepository.listRuns", () => {
  it("lists newest first with cursor paging", () => {
    const ids = Array.from({ length: 5 }, () => fresh.repo.createRun(newRun({})).id);
    const newestFirst = [...ids].reverse();
    const pages: string[][] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = fresh.repo.listRuns({ limit: 2, ...(cursor === undefined ? {} : { cursor }) });
      pages.push(page.items.map((r) => r.id));
      if (page.nextCursor === null) break;
      expect(page.nextCursor).toBe(page.items.at(-1)?.id);
      cursor = page.nextCursor;
    }
    expect(pages).toEqual([newestFirst.slice(0, 2), newestFirst.slice(2, 4), newestFirst.slice(4)]);
  });

  it("gives no cursor when the page holds exactly the rest", () => {
    for (let i = 0; i < 3; i++) fresh.repo.createRun(newRun({}));
    const page = fresh.repo.listRuns({ limit: 3 });
    expect(page.items).toHaveLength(3);
    expect(page.nextCursor).toBeNull();
    expect(fresh.repo.listRuns({ limit: 2 }).nextCursor).not.toBeNull();
  });

  it("filters by session and by status", async () => {
    const a1 = fresh.repo.createRun(newRun({}, { sessionId: "a" }));
    await finishRun(a1.id, "failed");
    const a2 = fresh.repo.createRun(newRun({}, { sessionId: "a" }));
    const b1 = fresh.repo.createRun(newRun({}, { sessionId: "b" }));
    await finishRun(b1.id, "succeeded");

    expect(fresh.repo.listRuns({ limit: 10, sessionId: "a" }).items.map((r) => r.id)).toEqual([
      a2.id,
      a1.id,
    ]);
    expect(fresh.repo.listRuns({ limit: 10, status: "queued" }).items.map((r) => r.id)).toEqual([
      a2.id,
    ]);
    expect(fresh.repo.listRuns({ limit: 10, status: "failed" }).items.map((r) => r.id)).toEqual([
      a1.id,
    ]);
    expect(
      fresh.repo
        .listRuns({ limit: 10, sessionId: "b", status: "succeeded" })
        .items.map((r) => r.id),
    ).toEqual([b1.id]);
    expect(fresh.repo.listRuns({ limit: 10, sessionId: "b", status: "queued" }).items).toEqual([]);
    expect(fresh.repo.listRuns({ limit: 10, sessionId: "nobody" })).toEqual({
      items: [],
      nextCursor: null,
    });

    const page = fresh.repo.listRuns({ limit: 1, sessionId: "a" });
    expect(page.items.map((r) => r.id)).toEqual([a2.id]);
    expect(
      fresh.repo
        .listRuns({ limit: 1, sessionId: "a", cursor: page.nextCursor! })
        .items.map((r) => r.id),
    ).toEqual([a1.id]);
  });
});

describe("RunRepository events", () => {
  it("pages events with an exclusive `after` and a limit, seq gap-free across writers", async () => {
    const run = fresh.repo.createRun(newRun({}));
    const claimed = (await fresh.store.claimRun(run.id))!;
    const budget = { elapsedMs: 0, remainingIterations: 6 };
    await fresh.store.commit(
      run.id,
      claimed.run.epoch,
      {
        run: { status: "running" },
        events: [
          { type: "run_started", data: { budget } },
          { type: "iteration_started", data: { iteration: 1, budget } },
        ],
      },
      Date.now(),
    );
    fresh.repo.requestStop(run.id, Date.now());
    await fresh.store.commit(
      run.id,
      claimed.run.epoch,
      { events: [{ type: "agent_started", data: { budget } }] },
      Date.now(),
    );
    const all = fresh.repo.listEvents(run.id, 0, 1000);
    expect(all.map((e) => [e.seq, e.type])).toEqual([
      [1, "run_queued"],
      [2, "run_started"],
      [3, "iteration_started"],
      [4, "stop_requested"],
      [5, "agent_started"],
    ]);
    expect(fresh.repo.listEvents(run.id, 2, 1000).map((e) => e.seq)).toEqual([3, 4, 5]);
    expect(fresh.repo.listEvents(run.id, 1, 2).map((e) => e.seq)).toEqual([2, 3]);
    expect(fresh.repo.listEvents(run.id, 5, 1000)).toEqual([]);
  });

  it("numbers each run's events on their own", () => {
    const a = fresh.repo.createRun(newRun({}));
    const b = fresh.repo.createRun(newRun({}));
    expect(fresh.repo.listEvents(a.id, 0, 10).map((e) => e.seq)).toEqual([1]);
    expect(fresh.repo.listEvents(b.id, 0, 10).map((e) => e.seq)).toEqual([1]);
  });
});

describe("RunRepository.requestStop", () => {
  it("marks the run stopping once, however often it is asked", () => {
    const run = fresh.repo.createRun(newRun({}));
    const first = fresh.repo.requestStop(run.id, 5000);
    expect(first).toMatchObject({ kind: "stopping", run: { id: run.id, status: "stopping" } });
    const second = fresh.repo.requestStop(run.id, 6000);
    expect(second).toMatchObject({ kind: "stopping", run: { status: "stopping" } });
    const stops = fresh.repo.listEvents(run.id, 0, 100).filter((e) => e.type === "stop_requested");
    expect(stops).toHaveLength(1);
    expect(stops[0]?.data.budget).toEqual({ elapsedMs: 0, remainingIterations: 6 });
  });

  it("leaves a finished run as it is", async () => {
    const run = fresh.repo.createRun(newRun({}));
    await finishRun(run.id);
    const before = fresh.repo.listEvents(run.id, 0, 100);
    const result = fresh.repo.requestStop(run.id, Date.now());
    expect(result).toMatchObject({ kind: "finished", run: { status: "succeeded" } });
    expect(fresh.repo.listEvents(run.id, 0, 100)).toEqual(before);
  });

  it("reports an unknown run", () => {
    expect(fresh.repo.requestStop("nope", Date.now())).toEqual({ kind: "not_found" });
  });
});

describe("RunRepository.finalizeStop", () => {
  it("leaves runs that are not stopping alone", async () => {
    const run = fresh.repo.createRun(newRun({}));
    expect(fresh.repo.finalizeStop(run.id, 1)).toMatchObject({ status: "queued" });
    await finishRun(run.id);
    expect(fresh.repo.finalizeStop(run.id, 1)).toMatchObject({ status: "succeeded" });
    expect(fresh.repo.finalizeStop("nope", 1)).toBeNull();
  });
});
