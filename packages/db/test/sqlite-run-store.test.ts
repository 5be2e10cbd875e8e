import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Database, RunRepository } from "@looprun/db";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { failurePatternSuite } from "./failure-patterns-suite";
import { runStoreSuite } from "./run-store-suite";
import { sqliteHarness } from "./store-harness";
import {
  freshDatabase,
  freshStoreForEachTest,
  newRun,
  removeDir,
  startWorker,
  workerOutput,
} from "./support";

// The behaviour every store shares (the same suite runs on PostgreSQL in pg-run-store.test.ts).
runStoreSuite("SQLite", sqliteHarness);
failurePatternSuite("SQLite", sqliteHarness);

describe("SqliteRunStore across processes", () => {
  let dir: string;
  let path: string;
  let database: Database;
  let repo: RunRepository;
  beforeEach(async () => {
    ({ dir, path, database } = await freshDatabase());
    repo = new RunRepository(database.db);
  });
  afterEach(async () => {
    database.close();
    await removeDir(dir);
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

describe("SqliteRunStore's commits, page by page", () => {
  const fresh = freshStoreForEachTest();

  /** The pages a commit wrote: the WAL's frames after it, emptied before. */
  const pagesWritten = async (commit: () => Promise<unknown>) => {
    fresh.database.sqlite.pragma("wal_checkpoint(TRUNCATE)");
    await commit();
    const [frames] = fresh.database.sqlite.pragma("wal_checkpoint(PASSIVE)") as { log: number }[];
    return frames?.log;
  };

  it("leaves the indexes on a run's status alone when a commit does not change it", async () => {
    const { repo, store } = fresh;
    const { id } = repo.createRun(newRun({}));
    const claimed = await store.claimRun(id);
    if (!claimed) throw new Error("not claimed");
    const { epoch } = claimed.run;
    const running = await store.commit(id, epoch, { run: { status: "running" } }, Date.now());
    expect(running.status).toBe("running");

    // The run's row alone: neither the index of runs by status nor that of one active run
    // per session (each a page more, as every commit of an iteration wrote before).
    expect(await pagesWritten(() => store.commit(id, epoch, { run: { activePgid: 42 } }, 1))).toBe(
      1,
    );
    expect(
      await pagesWritten(() =>
        store.commit(id, epoch, { run: { status: "running", progress: "again" } }, 2),
      ),
    ).toBe(1);
    // Asked for the status it has and nothing else: nothing to write.
    expect(
      await pagesWritten(() => store.commit(id, epoch, { run: { status: "running" } }, 3)),
    ).toBe(0);

    const after = repo.getRun(id);
    expect(after).toMatchObject({ status: "running", activePgid: 42, progress: "again" });
    // A change of status still reaches the indexes: the run is found by it.
    await store.commit(id, epoch, { run: { status: "stopping" } }, 4);
    expect(repo.listRuns({ status: "stopping", limit: 10 }).items.map((r) => r.id)).toEqual([id]);
    expect(repo.listRuns({ status: "running", limit: 10 }).items).toEqual([]);
  });
});
