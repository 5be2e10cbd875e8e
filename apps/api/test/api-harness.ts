import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RUN_QUEUE } from "@looprun/core";
import { openDatabase, RunRepository } from "@looprun/db";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { createApp } from "../src/app";
import { createRunQueue } from "../src/run-queue";

/** The API over `app.request()`, with a real SQLite file and a real Redis queue. */
export function apiHarness(redisUrl: string) {
  const dir = mkdtempSync(join(tmpdir(), "looprun-api-test-"));
  const database = openDatabase(join(dir, "looprun.db"));
  const repo = new RunRepository(database.db);
  const prefix = `api-test-${Math.random().toString(36).slice(2)}`;
  const queue = createRunQueue({ redisUrl, prefix });
  const workspacesRoot = join(dir, "workspaces");
  const app = createApp({ repo, queue, workspacesRoot, dbHealthy: () => true });
  const inspectConnection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  inspectConnection.on("error", () => {});
  const inspect = new Queue(RUN_QUEUE, { connection: inspectConnection, prefix });

  const request = async (method: string, path: string, body?: unknown) => {
    const res = await app.request(path, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await res.text();
    // biome-ignore lint/suspicious/noExplicitAny: test responses are checked field by field
    return { status: res.status, body: (text ? JSON.parse(text) : null) as any };
  };

  const untilReady = async () => {
    for (let i = 0; i < 100 && !queue.isReady(); i++) await new Promise((r) => setTimeout(r, 20));
  };

  return {
    app,
    repo,
    database,
    queue,
    inspect,
    workspacesRoot,
    request,
    untilReady,
    async close() {
      if (inspectConnection.status === "ready") {
        await inspect.obliterate({ force: true });
        await inspect.close();
      }
      inspectConnection.disconnect();
      await queue.close();
      database.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
