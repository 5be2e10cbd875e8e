import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  normalizeSubmission,
  RUN_JOB_NAME,
  RUN_QUEUE,
  type RunJob,
  RunSubmission,
} from "@looprun/core";
import { openStorage, type Storage } from "@looprun/db";
import { Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { afterEach, describe, expect, inject, it } from "vitest";
import { freshPostgresDatabase } from "../../../tests/support/pg-test-database";
import { isAlive, runsForRun, waitFor } from "../../../tests/support/processes";
import { reconcile } from "../src/reconciler";

const silent = { info() {}, warn() {} };

const spec = normalizeSubmission(
  RunSubmission.parse({
    task: "t",
    agent: { type: "command", command: "true" },
    testCommand: "true",
  }),
);

describe.each(["sqlite", "postgres"] as const)("the reconciler on %s", (engine) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setup() {
    const dir = mkdtempSync(join(tmpdir(), "looprun-reconcile-"));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    let storage: Storage;
    if (engine === "postgres") {
      const db = await freshPostgresDatabase("looprun_reconcile");
      cleanups.push(() => db.drop());
      storage = await openStorage({ url: db.url, path: "", maxConnections: 2 });
    } else {
      storage = await openStorage({ path: join(dir, "looprun.db") });
    }
    cleanups.push(() => storage.close());
    const connection = new Redis(inject("redisUrl"), { maxRetriesPerRequest: null });
    const queue = new Queue<RunJob>(RUN_QUEUE, {
      connection,
      prefix: `reconcile-${Math.random().toString(36).slice(2)}`,
    });
    cleanups.push(async () => {
      await queue.obliterate({ force: true });
      await queue.close();
      connection.disconnect();
    });
    const submit = async (id: string, workspace: string) => {
      await storage.repo.createRun({
        id,
        sessionId: id,
        sessionWorkspace: workspace,
        workspace,
        spec,
        createdAt: Date.now() - 60_000,
      });
    };
    return { dir, storage, queue, submit };
  }

  it("enqueues again the unfinished runs that have no job, once", async () => {
    const { dir, storage, queue, submit } = await setup();
    await submit("run-a", join(dir, "a/workspaces/s1"));
    await submit("run-b", join(dir, "b/workspaces/s2"));
    const opts = { repo: storage.repo, queue, failRun: async () => {}, logger: silent };
    expect((await reconcile(opts)).enqueued.sort()).toEqual(["run-a", "run-b"]);
    expect((await reconcile(opts)).enqueued).toEqual([]);
    expect((await queue.getJob("run-a"))?.data).toEqual({ runId: "run-a" });
  });

  it.skipIf(process.platform !== "linux")(
    "ends a stopping run that has no job once the processes a crashed worker left are dead",
    async () => {
      const { dir, storage, queue, submit } = await setup();
      await submit("run-s", join(dir, "s"));
      const now = Date.now();
      await storage.store.claimRun("run-s", {
        now,
        mutation: () => ({ run: { status: "running" as const, startedAt: now } }),
      });
      await storage.repo.requestStop("run-s", now);
      // Its worker died mid-command (kill -9): the command runs on, in its own group.
      const orphan = spawn("/bin/sh", ["-c", "exec sleep 300"], {
        env: { PATH: process.env.PATH, LOOPRUN_RUN_ID: "run-s" },
        detached: true,
        stdio: "ignore",
      });
      cleanups.push(async () => {
        if (isAlive(orphan.pid!)) process.kill(-orphan.pid!, "SIGKILL");
      });
      await waitFor(() => runsForRun(orphan.pid!, "sleep", "run-s"), {
        message: "the orphan's start",
      });

      const result = await reconcile({
        repo: storage.repo,
        queue,
        failRun: async () => {},
        logger: silent,
      });
      expect(result.stopped).toEqual(["run-s"]);
      expect((await storage.repo.getRun("run-s"))?.status).toBe("stopped");
      await waitFor(() => !isAlive(orphan.pid!), { message: "the orphan to die" });
    },
  );

  it("ends a stopping run whose job no worker holds (its stop could not reach Redis), not one a worker holds", async () => {
    const { dir, storage, queue, submit } = await setup();
    const now = Date.now();
    const stopping = async (id: string, delay: number) => {
      await submit(id, join(dir, id));
      await storage.store.claimRun(id, {
        now,
        mutation: () => ({ run: { status: "running" as const, startedAt: now } }),
      });
      await queue.add(RUN_JOB_NAME, { runId: id }, { jobId: id, delay });
      await storage.repo.requestStop(id, now);
    };
    // A worker holds run-held's job (it has the job's lock, as a running step does).
    await stopping("run-held", 0);
    const connection = new Redis(inject("redisUrl"), { maxRetriesPerRequest: null });
    const worker = new Worker<RunJob>(queue.name, null, { connection, prefix: queue.opts.prefix });
    cleanups.push(async () => {
      await worker.close(true);
      connection.disconnect();
    });
    expect((await worker.getNextJob("held-token"))?.id).toBe("run-held");
    // Cooling down for an hour, and queued behind busy workers.
    await stopping("run-cool", 3_600_000);
    await stopping("run-queued", 0);
    expect(await (await queue.getJob("run-cool"))?.getState()).toBe("delayed");
    expect(await (await queue.getJob("run-queued"))?.getState()).toBe("waiting");

    const result = await reconcile({
      repo: storage.repo,
      queue,
      failRun: async () => {},
      logger: silent,
    });
    expect(result.stopped.sort()).toEqual(["run-cool", "run-queued"]);
    for (const id of ["run-cool", "run-queued"]) {
      expect((await storage.repo.getRun(id))?.status).toBe("stopped");
      expect(await queue.getJob(id)).toBeUndefined();
    }
    // The held one is its worker's to stop.
    expect((await storage.repo.getRun("run-held"))?.status).toBe("stopping");
    expect(await (await queue.getJob("run-held"))?.getState()).toBe("active");
  });

  it("keeps to the runs of its cell when it has a workspaces root", async () => {
    const { dir, storage, queue, submit } = await setup();
    await submit("run-a", join(dir, "a/workspaces/s1"));
    await submit("run-b", join(dir, "b/workspaces/s2"));
    await submit("run-c", join(dir, "a/workspaces-other/s3"));
    const result = await reconcile({
      repo: storage.repo,
      queue,
      failRun: async () => {},
      logger: silent,
      workspacesRoot: join(dir, "a/workspaces"),
    });
    expect(result.enqueued).toEqual(["run-a"]);
    expect(await queue.getJob("run-b")).toBeUndefined();
    expect(await queue.getJob("run-c")).toBeUndefined();
  });

  it("knows its cell's runs by their real path when its workspaces root is a symlink", async () => {
    const { dir, storage, queue, submit } = await setup();
    mkdirSync(join(dir, "real/workspaces"), { recursive: true });
    symlinkSync(join(dir, "real/workspaces"), join(dir, "link"));
    // The API stores a workspace with symlinks resolved.
    await submit("run-real", join(dir, "real/workspaces/s1"));
    const result = await reconcile({
      repo: storage.repo,
      queue,
      failRun: async () => {},
      logger: silent,
      workspacesRoot: join(dir, "link"),
    });
    expect(result.enqueued).toEqual(["run-real"]);
  });
});
