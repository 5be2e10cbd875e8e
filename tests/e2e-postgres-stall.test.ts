// PostgreSQL stalled, not stopped: its processes paused (SIGSTOP), so its connections stay open
// and nothing answers — as a server that hangs, or a network that drops packets without a reset.
// The API answers 503 `unavailable` once DATABASE_QUERY_TIMEOUT_MS has passed rather than waiting
// as long as the stall; once the server runs again it serves as before, and a submit answered 503
// left either nothing or a run that goes on to its end. The cluster is this file's own.
import { describe, expect, it } from "vitest";
import { usePrivatePostgresStack } from "./support/postgres-stack";
import { commandRun, submit, waitFor, waitForStatus } from "./support/stack";

const pg = usePrivatePostgresStack("looprun_stall", {
  DATABASE_QUERY_TIMEOUT_MS: "1500",
  LOOPRUN_RECONCILE_MS: "1000",
  DATABASE_POOL_SIZE: "4",
});

describe("PostgreSQL stalled", () => {
  it("answers 503 past the query deadline while the server is stalled, then serves again", async () => {
    const { cluster, stack } = pg;
    const before = await submit(stack, commandRun("echo before > f.txt", { testCommand: "true" }));
    expect(await waitForStatus(stack, before.id), stack.logs()).toMatchObject({
      status: "succeeded",
    });

    await cluster.freeze();
    let stalled: { status: number; body: { error?: { code?: string } } }[];
    try {
      // Each waits for its deadline, and is answered: reads and a submit alike.
      stalled = await Promise.all([
        stack.api("GET", "/api/runs"),
        stack.api("GET", `/api/runs/${before.id}`),
        stack.api(
          "POST",
          "/api/runs",
          commandRun("echo during > f.txt", { sessionId: "stalled", testCommand: "true" }),
        ),
      ]);
    } finally {
      await cluster.thaw();
    }
    for (const answer of stalled) {
      expect(answer.status, JSON.stringify(answer.body)).toBe(503);
      expect(answer.body.error?.code).toBe("unavailable");
    }

    // Serving again, on new connections (the stalled ones were ended).
    await waitFor(async () => (await stack.api("GET", "/api/runs")).status === 200, {
      timeoutMs: 30_000,
    });
    expect((await stack.api("GET", `/api/runs/${before.id}`)).body.status).toBe("succeeded");
    // The submit answered 503 reached the server before the stall: applied or not, never half.
    // Applied, its run is queued without a job, which the reconciler enqueues: it runs to its end.
    const inSession = await stack.api("GET", "/api/runs?sessionId=stalled");
    expect(inSession.body.items.length).toBeLessThanOrEqual(1);
    for (const run of inSession.body.items as { id: string }[]) {
      expect(await waitForStatus(stack, run.id), stack.logs()).toMatchObject({
        status: "succeeded",
      });
    }
    const after = await submit(
      stack,
      commandRun("echo after > f.txt", { sessionId: "stalled", testCommand: "true" }),
    );
    expect(await waitForStatus(stack, after.id), stack.logs()).toMatchObject({
      status: "succeeded",
    });
  }, 90_000);
});
