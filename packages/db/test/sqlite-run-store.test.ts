import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Database, RunRepository } from "@looprun/db";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { failurePatternSuite } from "./failure-patterns-suite";
import { runStoreSuite } from "./run-store-suite";
import { sqliteHarness } from "./store-harness";
import { freshDatabase, newRun, removeDir, startWorker, workerOutput } from "./support";

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
