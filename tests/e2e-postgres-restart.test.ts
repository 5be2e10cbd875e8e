// PostgreSQL restarting under a running loop (issue #10, with the guarantees of #5): the
// server is stopped in the middle of an iteration for longer than BullMQ's retries last, then
// started again. Nothing accepted is lost: the run goes on where it was and succeeds, its
// iterations recorded once each. Meanwhile the API answers 503 `unavailable`, not 500. The
// cluster is this file's own (the other files share theirs), stopped and started on its port.
import { describe, expect, it } from "vitest";
import { expectIterationsOnce } from "./support/cluster";
import { usePrivatePostgresStack } from "./support/postgres-stack";
import { commandRun, getIterations, submit, waitForEvent, waitForStatus } from "./support/stack";

const pg = usePrivatePostgresStack("looprun_restart", {
  LOOPRUN_LOCK_MS: "5000",
  LOOPRUN_STALLED_INTERVAL_MS: "2000",
  LOOPRUN_RECONCILE_MS: "1000",
  DATABASE_POOL_SIZE: "4",
});

describe("PostgreSQL restarting under a running run", () => {
  it("puts the run's step off while the database is down, then finishes the run", async () => {
    const { cluster, stack } = pg;
    // Each iteration bumps a counter and takes a second; the test wants three.
    const agent = "n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; sleep 1";
    const { id } = await submit(
      stack,
      commandRun(agent, { testCommand: 'test "$(cat n)" -ge 3', maxIterations: 8 }),
    );
    await waitForEvent(stack, id, "agent_started");
    await cluster.halt();
    try {
      // Down for longer than a job's three attempts (1 s and 2 s apart) would have lasted.
      await new Promise((r) => setTimeout(r, 6000));
      const runs = await stack.api("GET", "/api/runs");
      expect(runs.status).toBe(503);
      expect(runs.body.error.code).toBe("unavailable");
      // As its OpenAPI document says (served without the database).
      const doc = await stack.api("GET", "/api/openapi.json");
      expect(doc.body.paths["/api/runs"].get.responses["503"]).toBeDefined();
      const submitted = await stack.api(
        "POST",
        "/api/runs",
        commandRun("true", { testCommand: "true" }),
      );
      expect(submitted.status).toBe(503);
    } finally {
      await cluster.resume();
    }
    const run = await waitForStatus(stack, id, ["succeeded", "failed", "stopped"], {
      timeoutMs: 90_000,
    });
    expect(run.status, stack.logs().slice(-4000)).toBe("succeeded");
    const iterations = await getIterations(stack, id);
    expectIterationsOnce(iterations);
    // The iteration the outage interrupted was run again, as a crashed worker's would be.
    expect(iterations.filter((i) => i.status === "passed").length).toBe(1);
    expect(iterations.at(-1)?.status).toBe("passed");
  }, 150_000);
});
