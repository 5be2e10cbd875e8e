import { deferredSyncCommits } from "@looprun/db";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { WriteBatcher } from "../src/write-batcher";
import { useApiHarness, VALID_RUN as valid } from "./api-harness";

// A submit on SQLite commits its run without waiting for the disk and fsyncs the WAL in the
// thread pool while the run's job goes to Redis (the server's submitBatcher). These tests hold
// that fsync back — the real one, run once the test lets it — to see what waits for it.

describe("POST /api/runs: the answer waits for the disk (SQLite, fsync off the event loop)", () => {
  const h = useApiHarness("sqlite", {}, { each: true });
  let letSync: (error?: Error) => void;
  let syncAsked: Promise<void>;
  let close: () => void;
  type Answer = { id?: string; error?: { code: string } };
  let post: () => Promise<{ status: number; body: Answer }>;

  beforeEach(() => {
    if (h.storage.engine !== "sqlite") throw new Error("sqlite only");
    const commits = deferredSyncCommits(h.storage.database);
    let asked: () => void = () => {};
    syncAsked = new Promise<void>((r) => {
      asked = r;
    });
    const writeBatcher = new WriteBatcher({
      transaction: commits.commit,
      inTransaction: commits.inTransaction,
      close: commits.close,
      sync: async () => {
        const allowed = new Promise<void>((resolve, reject) => {
          letSync = (error) => (error ? reject(error) : resolve());
        });
        asked();
        await allowed;
        await commits.sync();
      },
    });
    close = () => writeBatcher.close();
    const app = h.appWith({ writeBatcher });
    post = async () => {
      const res = await app.request("/api/runs", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(valid),
      });
      return { status: res.status, body: (await res.json()) as Answer };
    };
  });
  afterEach(() => {
    close();
  });

  const waitingJobs = async () => (await h.inspect.getWaiting()).map((job) => job.id);
  /** Up to 10 s: a loaded machine (the whole suite at once) answers slowly. */
  const untilJobWaits = async () => {
    for (let i = 0; i < 1000 && (await waitingJobs()).length === 0; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
  };

  it("sends the job to Redis while the fsync runs, and answers 202 only once it is done", async () => {
    let answered = false;
    const answer = post().then((res) => {
      answered = true;
      return res;
    });
    await syncAsked;
    // The run is committed (visible) and its job in Redis, the fsync not done: no answer yet.
    await untilJobWaits();
    const [jobId] = await waitingJobs();
    expect(jobId).toBeDefined();
    expect((await h.repo.getRun(jobId ?? ""))?.status).toBe("queued");
    await new Promise((r) => setTimeout(r, 50));
    expect(answered).toBe(false);
    letSync();
    const res = await answer;
    expect(res.status).toBe(202);
    expect(res.body.id).toBe(jobId);
  });

  it("undoes a run whose fsync failed: 500, neither the run nor its job is left", async () => {
    const answer = post();
    await syncAsked;
    await untilJobWaits();
    expect(await waitingJobs()).toHaveLength(1);
    letSync(Object.assign(new Error("EIO: i/o error, fsync"), { code: "EIO" }));
    const res = await answer;
    expect(res.status).toBe(500);
    expect(res.body.error?.code).toBe("internal");
    expect((await h.repo.listRuns({ limit: 10 })).items).toHaveLength(0);
    expect(await waitingJobs()).toHaveLength(0);
  });
});
