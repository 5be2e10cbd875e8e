import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type IterationRecord, LeaseLostError, type NewEvent, runStep } from "@looprun/core";
import { type Database, RunRepository, SqliteRunStore } from "@looprun/db";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  freshDatabase,
  isAlive,
  newRun,
  readPids,
  removeDir,
  resources,
  startWorker,
  tempDir,
  waitFor,
  workerOutput,
} from "./support";

let dir: string;
let path: string;
let database: Database;
let repo: RunRepository;
let store: SqliteRunStore;
beforeEach(async () => {
  ({ dir, path, database } = await freshDatabase());
  repo = new RunRepository(database.db);
  store = new SqliteRunStore(database.db);
});
afterEach(async () => {
  database.close();
  await removeDir(dir);
});

const budget = { elapsedMs: 0, remainingIterations: 6 };
const event = (type: NewEvent["type"]): NewEvent => ({ type, data: { budget } });

function iteration(
  runId: string,
  n: number,
  attempt: number,
  patch: Partial<IterationRecord> = {},
): IterationRecord {
  return {
    runId,
    n,
    attempt,
    status: "running",
    outcome: null,
    prompt: `prompt ${n}/${attempt}`,
    agent: null,
    validation: [],
    reviewId: null,
    feedback: null,
    startedAt: 1000,
    finishedAt: null,
    ...patch,
  };
}

describe("SqliteRunStore.claimRun", () => {
  it("increments the epoch on every claim", async () => {
    const run = repo.createRun(newRun({}));
    expect((await store.claimRun(run.id))?.run.epoch).toBe(1);
    expect((await store.claimRun(run.id))?.run.epoch).toBe(2);
    expect(repo.getRun(run.id)?.epoch).toBe(2);
  });

  it("returns a finished run unchanged and a missing one as null", async () => {
    const run = repo.createRun(newRun({}));
    const claimed = (await store.claimRun(run.id))!;
    await store.commit(
      run.id,
      claimed.run.epoch,
      { run: { status: "succeeded", reason: "success" } },
      1,
    );
    expect((await store.claimRun(run.id))?.run).toMatchObject({
      status: "succeeded",
      epoch: claimed.run.epoch,
    });
    expect(await store.claimRun("nope")).toBeNull();
  });

  it("returns the latest iteration and the latest decided one", async () => {
    const run = repo.createRun(newRun({}));
    const { epoch } = (await store.claimRun(run.id))!.run;
    expect(await store.claimRun(run.id)).toMatchObject({ lastIteration: null, lastDecided: null });
    const { epoch: e2 } = (await store.claimRun(run.id))!.run;
    await store.commit(
      run.id,
      e2,
      { insertIteration: iteration(run.id, 1, 1, { status: "failed", feedback: "fix x" }) },
      1,
    );
    await store.commit(
      run.id,
      e2,
      { insertIteration: iteration(run.id, 2, 1, { status: "abandoned" }) },
      1,
    );
    await store.commit(run.id, e2, { insertIteration: iteration(run.id, 2, 2) }, 1);
    const claimed = (await store.claimRun(run.id))!;
    expect(claimed.run.epoch).toBe(epoch + 3);
    expect(claimed.lastIteration).toMatchObject({ n: 2, attempt: 2, status: "running" });
    expect(claimed.lastDecided).toMatchObject({
      n: 1,
      attempt: 1,
      status: "failed",
      feedback: "fix x",
    });
  });
});

describe("SqliteRunStore.commit", () => {
  it("applies the run patch, the iteration changes and the events together", async () => {
    const run = repo.createRun(newRun({}));
    const { epoch } = (await store.claimRun(run.id))!.run;
    const after = await store.commit(
      run.id,
      epoch,
      {
        run: {
          status: "running",
          startedAt: 10,
          deadlineAt: 20,
          iteration: 1,
          progress: "working",
        },
        insertIteration: iteration(run.id, 1, 1),
        events: [event("run_started"), event("iteration_started")],
      },
      10,
    );
    expect(after).toMatchObject({
      status: "running",
      startedAt: 10,
      deadlineAt: 20,
      iteration: 1,
      progress: "working",
    });
    await store.commit(
      run.id,
      epoch,
      {
        updateIteration: {
          n: 1,
          attempt: 1,
          patch: {
            agent: { exitCode: 0, output: "ok", durationMs: 5 },
            status: "passed",
            outcome: "complete",
          },
        },
      },
      11,
    );
    expect(repo.listIterations(run.id)).toEqual([
      expect.objectContaining({
        n: 1,
        attempt: 1,
        status: "passed",
        outcome: "complete",
        prompt: "prompt 1/1",
        agent: { exitCode: 0, output: "ok", durationMs: 5 },
        validation: [],
      }),
    ]);
    expect(repo.listEvents(run.id, 0, 100).map((e) => [e.seq, e.type, e.at])).toEqual([
      [1, "run_queued", run.createdAt],
      [2, "run_started", 10],
      [3, "iteration_started", 10],
    ]);
  });

  it("throws LeaseLostError for a stale epoch and writes nothing", async () => {
    const run = repo.createRun(newRun({}));
    const stale = (await store.claimRun(run.id))!.run.epoch;
    await store.claimRun(run.id);
    const before = repo.getRun(run.id);
    await expect(
      store.commit(
        run.id,
        stale,
        {
          run: { status: "running", progress: "stale writer" },
          insertIteration: iteration(run.id, 1, 1),
          events: [event("run_started")],
        },
        Date.now(),
      ),
    ).rejects.toSatisfy(
      (e) => e instanceof LeaseLostError && e.epoch === stale && e.runId === run.id,
    );
    expect(repo.getRun(run.id)).toEqual(before);
    expect(repo.listIterations(run.id)).toEqual([]);
    expect(repo.listEvents(run.id, 0, 100).map((e) => e.type)).toEqual(["run_queued"]);
  });

  it("throws LeaseLostError for a run that does not exist", async () => {
    await expect(store.commit("nope", 1, {}, 1)).rejects.toBeInstanceOf(LeaseLostError);
  });

  it("keeps a stop request when a patch sets running", async () => {
    const run = repo.createRun(newRun({}));
    const { epoch } = (await store.claimRun(run.id))!.run;
    repo.requestStop(run.id, Date.now());
    const after = await store.commit(
      run.id,
      epoch,
      { run: { status: "running", progress: "p" } },
      Date.now(),
    );
    expect(after.status).toBe("stopping");
    expect(after.progress).toBe("p");
    expect(repo.getRun(run.id)?.status).toBe("stopping");
    // A terminal status still wins.
    const ended = await store.commit(
      run.id,
      epoch,
      { run: { status: "stopped", reason: "stopped" } },
      Date.now(),
    );
    expect(ended.status).toBe("stopped");
  });

  it("records an iteration (run, n, attempt) once; a duplicate rolls the whole write back", async () => {
    const run = repo.createRun(newRun({}));
    const { epoch } = (await store.claimRun(run.id))!.run;
    await store.commit(run.id, epoch, { insertIteration: iteration(run.id, 1, 1) }, 1);
    await expect(
      store.commit(
        run.id,
        epoch,
        {
          run: { progress: "dup" },
          insertIteration: iteration(run.id, 1, 1),
          events: [event("iteration_started")],
        },
        2,
      ),
    ).rejects.toThrow(/UNIQUE constraint failed/);
    expect(repo.getRun(run.id)?.progress).toBe("queued");
    expect(repo.listEvents(run.id, 0, 100).map((e) => e.type)).toEqual(["run_queued"]);
    // Another attempt of the same n is a different record.
    await store.commit(run.id, epoch, { insertIteration: iteration(run.id, 1, 2) }, 3);
    expect(repo.listIterations(run.id).map((i) => [i.n, i.attempt])).toEqual([
      [1, 1],
      [1, 2],
    ]);
  });

  it("gives distinct epochs to claims from concurrent processes", async () => {
    const run = repo.createRun(newRun({}));
    const go = join(dir, "go");
    const perWorker = 40;
    const workers = Array.from({ length: 3 }, () =>
      startWorker(["claim", path, go, run.id, String(perWorker)]),
    );
    await Promise.all(workers.map((w) => w.ready));
    writeFileSync(go, "");
    const results = await Promise.all(workers.map((w) => w.done));
    const epochs = results.flatMap((r) => (workerOutput(r) as { epochs: number[] }).epochs);
    expect(epochs).toHaveLength(3 * perWorker);
    expect(new Set(epochs).size).toBe(epochs.length);
    expect(Math.max(...epochs)).toBe(3 * perWorker);
    expect(repo.getRun(run.id)?.epoch).toBe(3 * perWorker);
  });
});

/** Creates a, b, c — one per iteration. */
const FIXER = "for f in a b c; do if [ ! -f $f ]; then touch $f; echo fixed $f; break; fi; done";
const CHECK =
  'missing=""; for f in a b c; do [ -f $f ] || missing="$missing $f"; done; ' +
  'if [ -n "$missing" ]; then echo "CHECK-FAILED missing:$missing"; exit 1; fi';

describe("the engine on SQLite", () => {
  let ws: string;
  beforeEach(async () => {
    ws = await tempDir("looprun-ws-");
  });
  afterEach(async () => {
    await removeDir(ws);
  });

  it("converges in three iterations", async () => {
    const run = repo.createRun(
      newRun(
        { agent: { type: "command", command: FIXER }, testCommand: CHECK, cooldownMs: 10 },
        { workspace: ws },
      ),
    );
    const res = resources(store);
    expect((await runStep(res, run.id)).kind).toBe("cooldown");
    expect((await runStep(res, run.id)).kind).toBe("cooldown");
    expect(await runStep(res, run.id)).toEqual({
      kind: "finished",
      status: "succeeded",
      reason: "success",
    });

    const final = repo.getRun(run.id)!;
    expect(final).toMatchObject({
      status: "succeeded",
      reason: "success",
      summary: "succeeded after 3 iterations",
      iteration: 3,
      epoch: 3,
    });
    expect(final.metrics).toMatchObject({ iterations: 3, validationFailures: 2 });

    const its = repo.listIterations(run.id);
    expect(its.map((i) => [i.n, i.attempt, i.status, i.outcome])).toEqual([
      [1, 1, "failed", "validation_failed"],
      [2, 1, "failed", "validation_failed"],
      [3, 1, "passed", "complete"],
    ]);
    expect(its[0]?.validation[0]).toMatchObject({
      command: CHECK,
      exitCode: 1,
      output: "CHECK-FAILED missing: b c\n",
    });
    expect(its[1]?.prompt).toContain("CHECK-FAILED missing: b c");
    expect(its[2]?.prompt).toContain("CHECK-FAILED missing: c");

    const events = repo.listEvents(run.id, 0, 1000);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    const step = (last: string) => ["iteration_started", "agent_started", "agent_finished", last];
    expect(events.map((e) => e.type)).toEqual([
      "run_queued",
      "run_started",
      ...step("validation_failed"),
      "cooldown_started",
      ...step("validation_failed"),
      "cooldown_started",
      ...step("validation_passed"),
      "run_finished",
    ]);
    for (const e of events) {
      expect(e.data.budget).toEqual(
        expect.objectContaining({
          elapsedMs: expect.any(Number),
          remainingIterations: expect.any(Number),
        }),
      );
    }
    expect(repo.activeRunOf(run.sessionId)).toBeNull();
  });

  it("stops a running iteration on requestStop, killing its processes", async () => {
    const run = repo.createRun(
      newRun(
        {
          agent: {
            type: "command",
            command: "echo $$ > agent.pids; sleep 30 & echo $! >> agent.pids; wait",
          },
          testCommand: "true",
        },
        { workspace: ws },
      ),
    );
    const pending = runStep(resources(store), run.id);
    const pidFile = join(ws, "agent.pids");
    await waitFor(
      () => existsSync(pidFile) && readPids(pidFile).length === 2,
      "the agent to start",
    );
    expect(repo.requestStop(run.id, Date.now())).toMatchObject({ kind: "stopping" });
    expect(await pending).toEqual({ kind: "finished", status: "stopped", reason: "stopped" });
    for (const pid of readPids(pidFile)) expect(isAlive(pid)).toBe(false);
    expect(repo.getRun(run.id)).toMatchObject({ status: "stopped", reason: "stopped" });
    expect(repo.listIterations(run.id)).toEqual([
      expect.objectContaining({ status: "failed", outcome: "stopped" }),
    ]);
    expect(repo.listEvents(run.id, 0, 1000).map((e) => e.type)).toEqual([
      "run_queued",
      "run_started",
      "iteration_started",
      "agent_started",
      "stop_requested",
      "run_finished",
    ]);
  });

  it("ends a run that was stopped while queued without running anything", async () => {
    const run = repo.createRun(newRun({}, { workspace: ws }));
    repo.requestStop(run.id, Date.now());
    expect(await runStep(resources(store), run.id)).toEqual({
      kind: "finished",
      status: "stopped",
      reason: "stopped",
    });
    expect(repo.listIterations(run.id)).toEqual([]);
    expect(repo.listEvents(run.id, 0, 100).map((e) => e.type)).toEqual([
      "run_queued",
      "stop_requested",
      "run_finished",
    ]);
  });
});
