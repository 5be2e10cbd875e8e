import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { normalizeSubmission, RunAlreadyActiveError, RunSubmission } from "@looprun/core";
import { type Database, openDatabase, RunRepository } from "@looprun/db";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { submitBatcher, WriteBatcher } from "../src/write-batcher";

const spec = normalizeSubmission(
  RunSubmission.parse({
    task: "t",
    agent: { type: "command", command: "true" },
    testCommand: "true",
  }),
);

describe("WriteBatcher (group commit on a real SQLite file)", () => {
  let dir: string;
  let database: Database;
  let repo: RunRepository;
  let commits: number;
  let batcher: WriteBatcher;
  let n = 0;
  const input = (sessionId: string) => ({
    id: `run-${String(++n).padStart(6, "0")}`,
    sessionId,
    sessionWorkspace: "/tmp/ws",
    workspace: "/tmp/ws",
    spec,
    createdAt: Date.now(),
  });

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "looprun-batcher-"));
    database = openDatabase(join(dir, "looprun.db"));
    repo = new RunRepository(database.db);
    commits = 0;
    batcher = new WriteBatcher({
      transaction: (fn) => {
        database.sqlite.transaction(fn).immediate();
        commits += 1;
      },
      inTransaction: () => database.sqlite.inTransaction,
    });
  });
  afterEach(() => {
    database.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("commits the writes handed over together in one transaction, each settling with its result", async () => {
    const runs = (
      await Promise.all(
        Array.from({ length: 20 }, (_, i) => batcher.run(() => repo.createRun(input(`s-${i}`)))),
      )
    ).map((c) => c.value);
    expect(commits).toBe(1);
    expect(new Set(runs.map((r) => r.id)).size).toBe(20);
    for (const run of runs) expect(repo.getRun(run.id)?.status).toBe("queued");
  });

  it("rolls back a failing write alone: one active run per session still holds within a batch", async () => {
    const results = await Promise.allSettled([
      batcher.run(() => repo.createRun(input("same"))),
      batcher.run(() => repo.createRun(input("same"))),
      batcher.run(() => repo.createRun(input("other"))),
    ]);
    expect(commits).toBe(1);
    const [first, second, other] = results;
    expect(first?.status).toBe("fulfilled");
    expect(other?.status).toBe("fulfilled");
    expect(second?.status).toBe("rejected");
    const firstId = first?.status === "fulfilled" ? first.value.value.id : "";
    const error = second?.status === "rejected" ? second.reason : null;
    expect(error).toBeInstanceOf(RunAlreadyActiveError);
    expect((error as RunAlreadyActiveError).activeRunId).toBe(firstId);
    expect(repo.getSession("same")?.runs.map((r) => r.id)).toEqual([firstId]);
    // The failed write left nothing behind: only the first run's event.
    expect(repo.listEvents(firstId, 0, 10).map((e) => e.type)).toEqual(["run_queued"]);
  });

  it("rejects every write of a transaction that cannot commit, stores none of them, and syncs nothing", async () => {
    let syncs = 0;
    const failing = new WriteBatcher({
      transaction: (fn) =>
        database.sqlite.transaction(() => {
          fn();
          throw new Error("disk on fire");
        })(),
      inTransaction: () => database.sqlite.inTransaction,
      sync: async () => {
        syncs += 1;
      },
    });
    const results = await Promise.allSettled([
      failing.run(() => repo.createRun(input("x-1"))),
      failing.run(() => repo.createRun(input("x-2"))),
    ]);
    expect(results.map((r) => r.status)).toEqual(["rejected", "rejected"]);
    expect(syncs).toBe(0);
    expect(repo.getSession("x-1")).toBeNull();
    expect(repo.getSession("x-2")).toBeNull();
  });

  it("never runs a write outside the transaction once SQLite has rolled it back", async () => {
    const results = await Promise.allSettled([
      batcher.run(() => database.sqlite.exec("ROLLBACK")),
      batcher.run(() => repo.createRun(input("after-rollback"))),
    ]);
    expect(results.map((r) => r.status)).toEqual(["rejected", "rejected"]);
    expect(repo.getSession("after-rollback")).toBeNull();
  });

  it("splits a large burst into transactions of at most maxBatch writes", async () => {
    const small = new WriteBatcher({
      transaction: (fn) => {
        database.sqlite.transaction(fn).immediate();
        commits += 1;
      },
      inTransaction: () => database.sqlite.inTransaction,
      maxBatch: 4,
    });
    const runs = await Promise.all(
      Array.from({ length: 10 }, (_, i) => small.run(() => repo.createRun(input(`b-${i}`)))),
    );
    expect(runs).toHaveLength(10);
    expect(commits).toBe(3);
  });
  it("with a sync, settles each write once committed and its durable once its transaction's sync did", async () => {
    let syncs = 0;
    let finish: (error?: Error) => void = () => {};
    const deferred = new WriteBatcher({
      transaction: (fn) => database.sqlite.transaction(fn).immediate(),
      inTransaction: () => database.sqlite.inTransaction,
      sync: () => {
        syncs += 1;
        return new Promise<void>((resolve, reject) => {
          finish = (error) => (error ? reject(error) : resolve());
        });
      },
    });
    const [a, b] = await Promise.all([
      deferred.run(() => repo.createRun(input("d-1"))),
      deferred.run(() => repo.createRun(input("d-2"))),
    ]);
    // Committed (another reader sees them) while the sync is still under way.
    expect(repo.getRun(a?.value.id ?? "")?.status).toBe("queued");
    expect(syncs).toBe(1);
    expect(a?.durable).toBe(b?.durable);
    let onDisk = false;
    const durable = a?.durable.then(() => {
      onDisk = true;
    });
    await new Promise((r) => setImmediate(r));
    expect(onDisk).toBe(false);
    finish();
    await durable;
    expect(onDisk).toBe(true);

    const c = await deferred.run(() => repo.createRun(input("d-3")));
    expect(syncs).toBe(2);
    finish(new Error("EIO: fsync"));
    await expect(c.durable).rejects.toThrow("EIO");
  });

  it("with a sync, holds the next transaction until the running sync is done, the writes that came meanwhile sharing it", async () => {
    const syncs: (() => void)[] = [];
    let transactions = 0;
    const deferred = new WriteBatcher({
      transaction: (fn) => {
        database.sqlite.transaction(fn).immediate();
        transactions += 1;
      },
      inTransaction: () => database.sqlite.inTransaction,
      sync: () => new Promise<void>((resolve) => syncs.push(resolve)),
    });
    const first = await deferred.run(() => repo.createRun(input("h-1")));
    expect(transactions).toBe(1);
    const inputs = [input("h-2"), input("h-3"), input("h-4")];
    const later = inputs.map((each) => deferred.run(() => repo.createRun(each)));
    await new Promise((r) => setTimeout(r, 20));
    // Not committed while the first transaction's sync runs.
    expect(transactions).toBe(1);
    for (const each of inputs) expect(repo.getRun(each.id)).toBeNull();
    syncs[0]?.();
    await first.durable;
    const committed = await Promise.all(later);
    expect(transactions).toBe(2);
    expect(syncs).toHaveLength(2);
    expect(new Set(committed.map((c) => c.durable)).size).toBe(1);
    for (const each of inputs) expect(repo.getRun(each.id)?.status).toBe("queued");
    syncs[1]?.();
    await Promise.all(committed.map((c) => c.durable));
  });

  it("submitBatcher: on an in-memory database, commits as a plain group commit (no file to sync)", async () => {
    const memory = openDatabase(":memory:");
    try {
      const memoryRepo = new RunRepository(memory.db);
      const api = submitBatcher(memory);
      const { value, durable } = await api.run(() => memoryRepo.createRun(input("mem")));
      await durable;
      expect(memoryRepo.getRun(value.id)?.status).toBe("queued");
      api.close();
    } finally {
      memory.close();
    }
  });

  it("submitBatcher: the API's batches commit visible, then settle durable once the WAL file is fsynced", async () => {
    const api = submitBatcher(database);
    const committed = await Promise.all(
      Array.from({ length: 5 }, (_, i) => api.run(() => repo.createRun(input(`api-${i}`)))),
    );
    await Promise.all(committed.map((c) => c.durable));
    const reader = openDatabase(join(dir, "looprun.db"));
    try {
      const readerRepo = new RunRepository(reader.db);
      for (const c of committed) expect(readerRepo.getRun(c.value.id)?.status).toBe("queued");
    } finally {
      reader.close();
    }
    // The connection's own writes keep synchronous=FULL.
    expect(Number(database.sqlite.pragma("synchronous", { simple: true }))).toBe(2);
    api.close();
  });
});
