import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type ApiProcess, FAST_RECOVERY, startApiProcess } from "./support/cluster";
import { freshPostgresDatabase } from "./support/pg-test-database";
import { waitFor } from "./support/processes";
import { commandRun, type Stack, startStack } from "./support/stack";

// The API killed with SIGKILL while submits stream in: every run it answered 202 for is
// stored and run; a run it committed without answering (killed between its commit and its
// enqueue, or before the 202 went out) is run too (the reconciler enqueues it), none is left
// queued. A kill -9 keeps the OS's page cache: this checks the order of the submit's steps,
// not its fsync (which only a power cut would test).

const LOOPS = 8;

interface RunRow {
  id: string;
  status: string;
}

describe.each(["sqlite", "postgres"] as const)(
  "API killed with SIGKILL mid-submits on %s",
  (engine) => {
    let stack: Stack;
    let doomed: ApiProcess;
    let dropDatabase = async () => {};

    beforeAll(async () => {
      let databaseUrl: string | undefined;
      if (engine === "postgres") {
        const database = await freshPostgresDatabase("looprun_crash");
        databaseUrl = database.url;
        dropDatabase = database.drop;
      }
      stack = await startStack({
        redisUrl: inject("redisUrl"),
        workers: 1,
        env: FAST_RECOVERY,
        ...(databaseUrl ? { databaseUrl } : {}),
      });
      doomed = await startApiProcess(stack, "api (killed)");
    });
    afterAll(async () => {
      await doomed?.stop();
      await stack?.stop();
      await dropDatabase();
    });

    async function allRuns(): Promise<RunRow[]> {
      const rows: RunRow[] = [];
      let cursor: string | null = null;
      do {
        const query: string = cursor ? `&cursor=${encodeURIComponent(cursor)}` : "";
        const res = await stack.api("GET", `/api/runs?limit=100${query}`);
        if (res.status !== 200) throw new Error(`GET /api/runs answered ${res.status}`);
        rows.push(...(res.body.items as RunRow[]));
        cursor = res.body.nextCursor;
      } while (cursor);
      return rows;
    }

    it("loses no run it answered 202 for, and leaves none it stored unrun", async () => {
      const accepted: string[] = [];
      let dead = false;
      const loops = Array.from({ length: LOOPS }, async (_, loop) => {
        for (let i = 0; !dead; i++) {
          const body = commandRun("true", { sessionId: `crash-${loop}-${i}`, testCommand: "true" });
          try {
            const res = await doomed.api("POST", "/api/runs", body, { timeoutMs: 10_000 });
            if (res.status === 202) accepted.push(res.body.id);
            else
              throw new Error(`POST /api/runs answered ${res.status}: ${JSON.stringify(res.body)}`);
          } catch (error) {
            // The kill cuts the requests in flight: those were never accepted.
            if (dead) return;
            throw error;
          }
        }
      });
      await waitFor(() => accepted.length >= 60, {
        timeoutMs: 60_000,
        message: "60 submits accepted by the API to be killed",
      });
      dead = true;
      expect((await doomed.proc.stop("SIGKILL")).signal).toBe("SIGKILL");
      await Promise.all(loops);

      // Every accepted run is there, and every stored run (accepted or not) ends.
      const stored = await allRuns();
      const ids = new Set(stored.map((run) => run.id));
      expect(accepted.filter((id) => !ids.has(id))).toEqual([]);
      expect(stored.length).toBeGreaterThanOrEqual(accepted.length);
      const finished = await waitFor(
        async () => {
          const runs = await allRuns();
          return runs.every((run) => run.status === "succeeded") ? runs : null;
        },
        { timeoutMs: 90_000, message: `every stored run succeeded\n${stack.logs()}` },
      );
      expect(finished.length).toBe(stored.length);
    }, 180_000);
  },
);
