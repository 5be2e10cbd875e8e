import type { RunStatus } from "@looprun/core";
import { RunRepository, SqliteRunStore } from "@looprun/db";
import { ulid } from "ulid";
import { beforeEach, describe, expect, it } from "vitest";
import { type RepoEngine, repoEngines } from "./repo-engines";
import { event, firstChange, iteration, snapshotRow } from "./store-fixtures";
import { freshDatabase, newRun, removeDir } from "./support";

// Retention (retention.ts) on both engines: the finished runs past the cut are deleted with
// every row recorded of them; active runs, recent ones and those a rollback holds stay.

type Engine = RepoEngine;

const engines = repoEngines();

const DAY = 86_400_000;
const T0 = Date.UTC(2030, 0, 1);
/** The retention's cut in these tests: runs that finished before it go. */
const CUT = T0 + 10 * DAY;

describe.each(engines)("retention on %s", (_name, open) => {
  let engine: Engine;
  let close: () => Promise<void>;
  beforeEach(async () => {
    ({ engine, close } = await open());
    return () => close();
  });

  /**
   * A run made at `createdAt` that ends `status` at `finishedAt` (null: it is still running),
   * with an iteration, events, tool calls, a review, a snapshot, its change and a phase
   * artifact recorded, as the engine records them.
   */
  async function run(
    createdAt: number,
    finishedAt: number | null,
    opts: { status?: RunStatus; sessionId?: string; workspace?: string } = {},
  ) {
    const input = newRun(
      {},
      {
        id: ulid(createdAt),
        createdAt,
        ...(opts.sessionId !== undefined ? { sessionId: opts.sessionId } : {}),
        workspace: opts.workspace ?? `/ws/${createdAt}`,
      },
    );
    await engine.repo.createRun(input);
    const { epoch } = (await engine.store.claimRun(input.id))!.run;
    const at = createdAt + 1000;
    await engine.store.commit(
      input.id,
      epoch,
      {
        run: { status: "running", startedAt: at, iteration: 1, latestSnapshot: "s1" },
        insertIteration: iteration(input.id, 1, 1, {
          status: "failed",
          outcome: "validation_failed",
          startedAt: at,
          finishedAt: at + 10,
        }),
        toolCalls: [
          {
            iteration: 1,
            server: "workspace",
            tool: "write_file",
            args: { path: "a.ts" },
            isError: false,
            result: "ok",
            durationMs: 3,
          },
        ],
        insertReview: {
          id: ulid(at),
          runId: input.id,
          sessionId: input.sessionId,
          phase: "review",
          iteration: 1,
          blockingIssues: ["x"],
          nonBlockingIssues: [],
          score: 10,
          fixPlan: ["fix x"],
          createdAt: at,
        },
        insertSnapshots: [snapshotRow(input.id, at)],
        change: firstChange(input.id, at),
        phaseArtifact: { runId: input.id, phase: "design", content: "the design", createdAt: at },
        events: [event("run_started"), event("iteration_started")],
      },
      at,
    );
    if (finishedAt !== null) {
      await engine.store.commit(
        input.id,
        epoch,
        {
          run: { status: opts.status ?? "failed", reason: "max_iterations", finishedAt },
          events: [event("run_finished")],
        },
        finishedAt,
      );
    }
    return input;
  }

  /** Every row of a run that the API serves, by kind: what retention must delete. */
  async function recorded(runId: string) {
    const { repo } = engine;
    return {
      run: (await repo.getRun(runId)) !== null,
      iterations: (await repo.listIterations(runId)).length,
      events: (await repo.listEvents(runId, 0, 1000)).length,
      toolCalls: (await repo.listToolCalls(runId)).length,
      reviews: (await repo.listReviews(runId)).length,
      snapshots: (await repo.artifacts.snapshots(runId)).length,
      change: (await repo.artifacts.change(runId)) !== null,
      phases: (await repo.artifacts.phases(runId)).length,
    };
  }
  const nothing = {
    run: false,
    iterations: 0,
    events: 0,
    toolCalls: 0,
    reviews: 0,
    snapshots: 0,
    change: false,
    phases: 0,
  };

  it("deletes the runs that finished before the cut with all their rows, and keeps the others", async () => {
    const failed = await run(T0, T0 + DAY, { sessionId: "old" });
    const succeeded = await run(T0 + DAY, T0 + 2 * DAY, { status: "succeeded" });
    const stopped = await run(T0 + 2 * DAY, CUT - 1, { status: "stopped" });
    // Kept: ended at the cut or after it, or not ended at all, however old.
    const endedAtCut = await run(T0 + 3 * DAY, CUT);
    const recent = await run(CUT + DAY, CUT + 2 * DAY);
    const running = await run(T0 + 4 * DAY, null);
    const kept = [endedAtCut, recent, running];
    const before = await Promise.all(kept.map((r) => recorded(r.id)));
    expect(before[0]).toMatchObject({ run: true, iterations: 1, events: 4, toolCalls: 1 });

    const candidates = await engine.repo.retention.candidates(CUT, "", 10);
    expect(candidates).toEqual(
      [failed, succeeded, stopped].map((r) => ({
        id: r.id,
        sessionId: r.sessionId,
        workspace: r.workspace,
      })),
    );
    const ids = [...candidates.map((r) => r.id), ...kept.map((r) => r.id)];
    expect((await engine.repo.retention.deleteRuns(ids, CUT, CUT + DAY)).sort()).toEqual(
      [failed.id, succeeded.id, stopped.id].sort(),
    );

    for (const gone of [failed, succeeded, stopped])
      expect(await recorded(gone.id)).toEqual(nothing);
    expect(await Promise.all(kept.map((r) => recorded(r.id)))).toEqual(before);
    // The session stays (a later run of it keeps its workspace), without the run.
    expect(await engine.repo.getSession("old")).toMatchObject({ runs: [] });
    expect(await engine.repo.retention.candidates(CUT, "", 10)).toEqual([]);
  });

  it("keeps a run whose Idempotency-Key is younger than 24 hours: a retry gets it, not a new run", async () => {
    const createdAt = CUT - DAY / 2;
    const input = { ...newRun({}, { id: ulid(createdAt), createdAt }) };
    const keyed = { ...input, idempotency: { key: "retry-me", requestHash: "h" } };
    await engine.repo.createRun(keyed);
    const { epoch } = (await engine.store.claimRun(input.id))!.run;
    await engine.store.commit(
      input.id,
      epoch,
      { run: { status: "succeeded", reason: "success", finishedAt: createdAt + 1000 } },
      createdAt + 1000,
    );
    await run(CUT + DAY, null); // the newest iteration's run (see the SQLite test below)
    // Past the retention (a cut after its end), but its key is 12 hours old.
    expect(await engine.repo.retention.deleteRuns([input.id], CUT, CUT)).toEqual([]);
    const retry = newRun({}, { id: ulid(CUT + 1), createdAt: CUT + 1 });
    expect(
      await engine.repo.createRun({ ...retry, idempotency: { key: "retry-me", requestHash: "h" } }),
    ).toMatchObject({ id: input.id, replayed: true });
    // Once the key is 24 hours old, the run goes, with its key.
    const later = createdAt + DAY + 1;
    expect(await engine.repo.retention.deleteRuns([input.id], CUT, later)).toEqual([input.id]);
  });

  it("names those of some runs it has and every snapshot recorded of them, for looprun gc", async () => {
    const first = await run(T0, T0 + DAY, { sessionId: "sa" });
    const second = await run(T0 + DAY, null, { sessionId: "sa" });
    const other = await run(T0 + 2 * DAY, null, { sessionId: "sb" });
    const { epoch } = (await engine.store.claimRun(second.id))!.run;
    const at = T0 + DAY + 5000;
    await engine.store.commit(
      second.id,
      epoch,
      {
        run: { iteration: 2, baselineSnapshot: "b0", latestSnapshot: "s2" },
        insertSnapshots: [
          { ...snapshotRow(second.id, at), n: 2, snapshotId: "s2", parentId: "s1" },
          { ...snapshotRow(second.id, at), n: 2, attempt: 2, snapshotId: "s2b", parentId: "s1" },
        ],
      },
      at,
    );
    const unknown = ulid(T0 + 3 * DAY);
    const both = await engine.repo.retention.snapshotsOfRuns([first.id, second.id, unknown]);
    expect(both.runIds.sort()).toEqual([first.id, second.id].sort());
    // The fixtures' rows name `base` and `s1`; the second run's its baseline and both attempts.
    expect(both.snapshotIds.sort()).toEqual(["b0", "base", "s1", "s2", "s2b"]);
    expect(await engine.repo.retention.snapshotsOfRuns([other.id])).toEqual({
      runIds: [other.id],
      snapshotIds: expect.arrayContaining(["base", "s1"]),
    });
    expect(await engine.repo.retention.snapshotsOfRuns([unknown])).toEqual({
      runIds: [],
      snapshotIds: [],
    });
    // A run retention deleted is named no more.
    await engine.repo.retention.deleteRuns([first.id], CUT, CUT);
    expect((await engine.repo.retention.snapshotsOfRuns([first.id, second.id])).runIds).toEqual([
      second.id,
    ]);
  });

  it("walks the candidates a page at a time, by id", async () => {
    const runs = [];
    for (let i = 0; i < 5; i++) runs.push(await run(T0 + i * DAY, T0 + i * DAY + 5000));
    const first = await engine.repo.retention.candidates(CUT, "", 2);
    const second = await engine.repo.retention.candidates(CUT, first[1]!.id, 2);
    const third = await engine.repo.retention.candidates(CUT, second[1]!.id, 2);
    expect([...first, ...second, ...third].map((r) => r.id)).toEqual(runs.map((r) => r.id));
    expect(third).toHaveLength(1);
  });

  it("leaves a run that a rollback holds until the hold ends, and one that ended after the cut", async () => {
    const held = await run(T0, T0 + DAY);
    await run(CUT + DAY, null); // the newest iteration's run (see the SQLite test below)
    const hold = { workspace: held.workspace, sessionId: held.sessionId, runId: held.id };
    expect(await engine.repo.holdWorkspace({ ...hold, now: CUT, ttlMs: 60_000 })).toEqual({
      held: true,
    });
    expect(await engine.repo.retention.deleteRuns([held.id], CUT, CUT + 1000)).toEqual([]);
    // An earlier cut than its end: not past the retention (a caller with another setting).
    expect(await engine.repo.retention.deleteRuns([held.id], T0 + DAY, CUT + 60_000)).toEqual([]);
    expect((await recorded(held.id)).run).toBe(true);
    // The hold expired (its API died mid-restore): the run goes.
    expect(await engine.repo.retention.deleteRuns([held.id], CUT, CUT + 60_000)).toEqual([held.id]);
    expect(await recorded(held.id)).toEqual(nothing);
  });
});

describe("retention on SQLite, and the metrics' rowid cursor", () => {
  it("keeps the run of the newest iteration and tool call until newer ones come: no rowid is used twice", async () => {
    const { dir, database } = await freshDatabase();
    try {
      const repo = new RunRepository(database.db);
      const store = new SqliteRunStore(database.db);
      const reader = repo.metricsReader();
      const finishedRun = async (createdAt: number, finishedAt: number) => {
        const input = newRun({}, { id: ulid(createdAt), createdAt });
        repo.createRun(input);
        const { epoch } = (await store.claimRun(input.id))!.run;
        await store.commit(
          input.id,
          epoch,
          {
            run: { status: "failed", reason: "max_iterations", finishedAt, iteration: 1 },
            insertIteration: iteration(input.id, 1, 1, {
              status: "failed",
              outcome: "validation_failed",
              startedAt: createdAt,
              finishedAt,
            }),
            toolCalls: [
              {
                iteration: 1,
                server: "workspace",
                tool: "write_file",
                args: {},
                isError: false,
                result: "ok",
                durationMs: 1,
              },
            ],
          },
          finishedAt,
        );
        return input.id;
      };
      const counted = () => {
        let iterations = 0;
        const read = reader.read(() => {
          iterations++;
        }) as Awaited<ReturnType<typeof reader.read>>;
        return { iterations, toolCalls: read.newToolCalls.reduce((n, c) => n + c.calls, 0) };
      };

      const old = await finishedRun(T0, T0 + DAY);
      expect(counted()).toEqual({ iterations: 1, toolCalls: 1 });
      expect(repo.retention.deleteRuns([old], CUT, CUT)).toEqual([]);

      const next = await finishedRun(CUT + DAY, CUT + DAY + 1000);
      expect(counted()).toEqual({ iterations: 1, toolCalls: 1 });
      // No longer the newest: it goes, and the next run's rows are counted in their turn.
      expect(repo.retention.deleteRuns([old], CUT, CUT)).toEqual([old]);
      await finishedRun(CUT + 2 * DAY, CUT + 2 * DAY + 1000);
      expect(counted()).toEqual({ iterations: 1, toolCalls: 1 });
      expect(await repo.getRun(next)).not.toBeNull();
    } finally {
      database.close();
      await removeDir(dir);
    }
  });
});
