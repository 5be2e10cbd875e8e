import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { normalizeSubmission, RunSubmission, WorkspaceSnapshots } from "@looprun/core";
import { openStorage, type Storage } from "@looprun/db";
import { ulid } from "ulid";
import { afterEach, describe, expect, it } from "vitest";
import { parseWorkerEnv } from "../src/env";
import { pruneHistory } from "../src/retention";

const DAY = 86_400_000;
const NOW = Date.UTC(2030, 0, 31);

const spec = normalizeSubmission(
  RunSubmission.parse({
    task: "t",
    agent: { type: "command", command: "true" },
    testCommand: "true",
  }),
);

describe("pruneHistory", () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setup() {
    const dir = mkdtempSync(join(tmpdir(), "looprun-retention-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const storage: Storage = await openStorage({ path: join(dir, "looprun.db") });
    cleanups.push(() => storage.close());
    const snapshots = new WorkspaceSnapshots({ root: join(dir, "snapshots") });
    cleanups.push(() => snapshots.close());

    /** A run of `sessionId` in `workspace` that finished at `finishedAt`, with a snapshot. */
    const finished = async (sessionId: string, workspace: string, finishedAt: number) => {
      const createdAt = finishedAt - 60_000;
      const id = ulid(createdAt);
      mkdirSync(workspace, { recursive: true });
      writeFileSync(join(workspace, "file.txt"), id);
      await storage.repo.createRun({
        id,
        sessionId,
        sessionWorkspace: workspace,
        workspace,
        spec,
        createdAt,
      });
      const { epoch } = (await storage.store.claimRun(id))!.run;
      await snapshots.take({ sessionId, runId: id, workspace }, "baseline", null);
      await storage.store.commit(
        id,
        epoch,
        { run: { status: "succeeded", reason: "success", finishedAt } },
        finishedAt,
      );
      return id;
    };
    const refs = (sessionId: string) =>
      execFileSync(
        "git",
        [`--git-dir=${snapshots.gitDir(sessionId)}`, "for-each-ref", "--format=%(refname)"],
        { encoding: "utf8" },
      )
        .split("\n")
        .filter(Boolean)
        .sort();
    return { dir, storage, snapshots, finished, refs };
  }

  it("deletes this cell's runs past the retention, a batch at a time, with their snapshot refs", async () => {
    const { dir, storage, snapshots, finished, refs } = await setup();
    const cell = join(dir, "cell-a");
    const old = [
      await finished("a1", join(cell, "a1"), NOW - 9 * DAY),
      await finished("a1", join(cell, "a1"), NOW - 8 * DAY),
      await finished("a2", join(cell, "a2"), NOW - 7 * DAY),
    ];
    const recent = await finished("a1", join(cell, "a1"), NOW - DAY / 2);
    // Another host's cell (workers there delete its runs: their snapshots are there).
    const elsewhere = await finished("b1", join(dir, "cell-b", "b1"), NOW - 9 * DAY);
    expect(refs("a1")).toEqual([old[0], old[1], recent].map((id) => `refs/looprun/${id}`).sort());

    const logged: unknown[] = [];
    const result = await pruneHistory({
      repo: storage.repo,
      snapshots,
      retentionMs: DAY,
      workspacesRoot: cell,
      batch: 2,
      now: () => NOW,
      logger: { info: (obj) => logged.push(obj), warn: (obj) => logged.push(obj) },
    });

    expect(result).toEqual({ runs: 3 });
    for (const id of old) expect(await storage.repo.getRun(id)).toBeNull();
    expect(await storage.repo.getRun(recent)).not.toBeNull();
    expect(await storage.repo.getRun(elsewhere)).not.toBeNull();
    expect(refs("a1")).toEqual([`refs/looprun/${recent}`]);
    expect(refs("a2")).toEqual([]);
    expect(refs("b1")).toEqual([`refs/looprun/${elsewhere}`]);
    expect(logged).toEqual([{ runs: 3, finishedBefore: new Date(NOW - DAY).toISOString() }]);

    // A second pass finds nothing more; without a cell, the other host's run goes too.
    const again = {
      repo: storage.repo,
      snapshots,
      retentionMs: DAY,
      now: () => NOW,
      logger: { info() {}, warn() {} },
    };
    expect(await pruneHistory({ ...again, workspacesRoot: cell })).toEqual({ runs: 0 });
    expect(await pruneHistory(again)).toEqual({ runs: 1 });
    expect(refs("b1")).toEqual([]);
  });

  it("stops between batches once its signal is aborted", async () => {
    const { dir, storage, snapshots, finished } = await setup();
    const ids = [];
    for (let i = 0; i < 3; i++)
      ids.push(await finished(`s${i}`, join(dir, `w${i}`), NOW - (9 - i) * DAY));
    const stop = new AbortController();
    const repo = {
      retention: {
        candidates: storage.repo.retention.candidates.bind(storage.repo.retention),
        deleteRuns: async (ids: readonly string[], finishedBefore: number, now: number) => {
          const deleted = await storage.repo.retention.deleteRuns(ids, finishedBefore, now);
          stop.abort();
          return deleted;
        },
      },
    };
    const result = await pruneHistory({
      repo,
      snapshots,
      retentionMs: DAY,
      batch: 1,
      signal: stop.signal,
      now: () => NOW,
      logger: { info() {}, warn() {} },
    });
    expect(result).toEqual({ runs: 1 });
    expect(await storage.repo.getRun(ids[0]!)).toBeNull();
    expect(await storage.repo.getRun(ids[1]!)).not.toBeNull();
  });
});

describe("pruneHistory's cut", () => {
  it("is whole milliseconds, whatever the retention (PostgreSQL's bigint columns refuse a fraction)", async () => {
    const cuts: number[] = [];
    const repo = {
      retention: {
        candidates: (finishedBefore: number) => {
          cuts.push(finishedBefore);
          return [];
        },
        deleteRuns: () => [],
      },
    };
    // LOOPRUN_RETENTION_DAYS=1e-7: 8.64 ms.
    await pruneHistory({
      repo,
      snapshots: { forgetRuns: async () => {} },
      retentionMs: 1e-7 * DAY,
      now: () => NOW,
      logger: { info() {}, warn() {} },
    });
    expect(cuts).toEqual([NOW - 9]);
  });
});

describe("pruneHistory on SQLite (synchronous)", () => {
  it("lets the worker's timers run between batches", async () => {
    const dir = mkdtempSync(join(tmpdir(), "looprun-retention-"));
    const storage = await openStorage({ path: join(dir, "looprun.db") });
    try {
      for (let i = 0; i < 5; i++) {
        const createdAt = NOW - (9 - i) * DAY;
        const id = ulid(createdAt);
        await storage.repo.createRun({
          id,
          sessionId: `s${i}`,
          sessionWorkspace: join(dir, `w${i}`),
          workspace: join(dir, `w${i}`),
          spec,
          createdAt,
        });
        const { epoch } = (await storage.store.claimRun(id))!.run;
        await storage.store.commit(
          id,
          epoch,
          { run: { status: "failed", reason: "error", finishedAt: createdAt + 1 } },
          createdAt + 1,
        );
      }
      // A timer due at once, as a lock renewal would be: it runs before the pass ends.
      let ranAt = -1;
      let deletedSoFar = 0;
      setTimeout(() => {
        ranAt = deletedSoFar;
      }, 0);
      const repo = {
        retention: {
          candidates: storage.repo.retention.candidates.bind(storage.repo.retention),
          deleteRuns: (ids: readonly string[], finishedBefore: number, now: number) => {
            const deleted = storage.repo.retention.deleteRuns(ids, finishedBefore, now) as string[];
            deletedSoFar += deleted.length;
            return deleted;
          },
        },
      };
      const snapshots = new WorkspaceSnapshots({ root: join(dir, "snapshots") });
      const result = await pruneHistory({
        repo,
        snapshots,
        retentionMs: DAY,
        batch: 1,
        now: () => NOW,
        logger: { info() {}, warn() {} },
      });
      expect(result).toEqual({ runs: 5 });
      expect(ranAt).toBeGreaterThanOrEqual(0);
      expect(ranAt).toBeLessThan(5);
    } finally {
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the worker's timer settings", () => {
  it("refuse a delay Node's timers cannot keep (a longer one fires every millisecond)", () => {
    expect(
      parseWorkerEnv({ LOOPRUN_RETENTION_CHECK_MS: "2147483647" }).LOOPRUN_RETENTION_CHECK_MS,
    ).toBe(2_147_483_647);
    for (const name of [
      "LOOPRUN_RETENTION_CHECK_MS",
      "LOOPRUN_RECONCILE_MS",
      "LOOPRUN_STOP_POLL_MS",
    ]) {
      expect(() => parseWorkerEnv({ [name]: "3000000000" })).toThrow(
        new RegExp(`${name}: Too big`),
      );
    }
  });
});

describe("LOOPRUN_RETENTION_DAYS", () => {
  it("takes a positive number of days, and names the variable of a bad one", () => {
    expect(parseWorkerEnv({}).LOOPRUN_RETENTION_DAYS).toBeUndefined();
    expect(parseWorkerEnv({ LOOPRUN_RETENTION_DAYS: "30" }).LOOPRUN_RETENTION_DAYS).toBe(30);
    expect(parseWorkerEnv({ LOOPRUN_RETENTION_DAYS: "0.5" }).LOOPRUN_RETENTION_DAYS).toBe(0.5);
    for (const bad of ["0", "-1", "thirty", "", "1e3"]) {
      expect(() => parseWorkerEnv({ LOOPRUN_RETENTION_DAYS: bad })).toThrow(
        /LOOPRUN_RETENTION_DAYS: must be/,
      );
    }
  });
});
