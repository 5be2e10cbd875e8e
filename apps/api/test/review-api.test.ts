import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { normalizeSubmission, type RunStatus, RunSubmission, runStep } from "@looprun/core";
import { beforeAll, describe, expect, it } from "vitest";
import { ENGINES, useApiHarness } from "./api-harness";

const silent = { info() {}, warn() {}, error() {} };

/** Blocks until count.txt says 2; the fix plan says how. */
const REVIEWER =
  'if grep -q 2 count.txt; then echo \'{"blockingIssues":[],"nonBlockingIssues":["fine"],"score":90,"fixPlan":[]}\'; ' +
  'else echo \'{"blockingIssues":["count must reach 2"],"nonBlockingIssues":[],"score":10,"fixPlan":["increment count.txt"]}\'; fi';

describe.each(ENGINES)("review, snapshot and stats routes over app.request() on %s", (engine) => {
  const h = useApiHarness(engine);
  let snapshotsDir: string;
  beforeAll(async () => {
    snapshotsDir = join(h.workspacesRoot, "..", "snapshots");
  });

  const text = async (path: string) => {
    const res = await h.app.request(path);
    return {
      status: res.status,
      type: res.headers.get("content-type"),
      headers: res.headers,
      body: await res.text(),
    };
  };

  /** Drives a submitted run to its end in this process, as a worker would. */
  const drive = async (runId: string) => {
    const store = h.store;
    const res = {
      store,
      logger: silent,
      commandEnv: process.env,
      envAllowlist: [],
      snapshotsDir,
      stopPollMs: 50,
    };
    for (let step = 0; step < 10; step++) {
      const result = await runStep(res, runId);
      if (result.kind !== "cooldown") return result;
    }
    throw new Error("the run did not finish");
  };

  it("serves a reviewed run's convergence, reviews, iteration diffs, patch and artifacts", async () => {
    const submitted = await h.request("POST", "/api/runs", {
      task: "count to two",
      sessionId: "review-api-1",
      agent: {
        type: "command",
        command:
          'if [ -n "$LOOPRUN_PHASE" ]; then echo planned; else echo $(( $(cat count.txt) + 1 )) > count.txt; fi',
      },
      review: { type: "command", command: REVIEWER },
      phases: ["planning", "packaging"],
      cooldownMs: 0,
    });
    expect(submitted.status).toBe(202);
    const id: string = submitted.body.id;
    // The worker creates a missing workspace when the run starts; this one is seeded first.
    mkdirSync(join(h.workspacesRoot, "review-api-1"), { recursive: true });
    writeFileSync(join(h.workspacesRoot, "review-api-1", "count.txt"), "0\n");
    expect((await text(`/api/runs/${id}/patch`)).status).toBe(404);
    expect(await drive(id)).toMatchObject({ status: "succeeded" });

    const run = await h.request("GET", `/api/runs/${id}`);
    expect(run.body).toMatchObject({
      status: "succeeded",
      review: { type: "command", command: REVIEWER, timeoutMs: 600_000 },
      phases: ["planning", "packaging"],
      metrics: { iterations: 2, reviewBlockings: 1 },
      convergence: {
        iterations: 2,
        validationFailures: 0,
        reviewBlockings: 1,
        issuesFixedAutomatically: 1,
        issuesRemaining: 0,
        totalTimeMs: expect.any(Number),
      },
    });
    expect(run.body.snapshots.baseline).toMatch(/^[0-9a-f]{40}$/);

    const reviews = (await h.request("GET", `/api/runs/${id}/reviews`)).body.items;
    expect(
      reviews.map((r: { iteration: number; blockingIssues: string[] }) => [
        r.iteration,
        r.blockingIssues,
      ]),
    ).toEqual([
      [1, ["count must reach 2"]],
      [2, []],
    ]);
    expect(reviews[0]).toMatchObject({
      runId: id,
      sessionId: "review-api-1",
      phase: "review",
      score: 10,
      fixPlan: ["increment count.txt"],
    });
    expect(run.body.latestReviewId).toBe(reviews[1].id);

    const iterations = (await h.request("GET", `/api/runs/${id}/iterations`)).body.items;
    expect(iterations[0]).toMatchObject({
      outcome: "review_blocking",
      reviewId: reviews[0].id,
      snapshot: { parentId: run.body.snapshots.baseline, diffTruncated: false },
    });
    expect(iterations[1].snapshot.id).toBe(run.body.snapshots.latest);
    expect(iterations[1].prompt).toContain("increment count.txt");
    expect(iterations[1].prompt).toContain("planned");

    const diff1 = await text(`/api/runs/${id}/iterations/1/diff`);
    expect(diff1.status).toBe(200);
    expect(diff1.type).toContain("text/plain");
    expect(diff1.body).toContain("-0\n+1\n");
    expect(diff1.headers.get("x-looprun-snapshot")).toBe(iterations[0].snapshot.id);
    expect((await text(`/api/runs/${id}/iterations/2/diff`)).body).toContain("-1\n+2\n");
    const patch = await text(`/api/runs/${id}/patch`);
    expect(patch.status).toBe(200);
    expect(patch.body).toContain("-0\n+2\n");

    const artifacts = (await h.request("GET", `/api/runs/${id}/artifacts`)).body;
    expect(artifacts.items.map((a: { phase: string }) => a.phase)).toEqual([
      "planning",
      "packaging",
    ]);
    expect(artifacts.items[0].content).toBe("planned\n");
    expect(artifacts.items[1].content).toContain("- count.txt");
    expect(artifacts.change).toMatchObject({
      files: ["count.txt"],
      iteration: 2,
      patchStored: true,
    });

    for (const path of [
      `/api/runs/${id}/iterations/3/diff`,
      `/api/runs/${id}/iterations/0/diff`,
      `/api/runs/${id}/iterations/x/diff`,
      "/api/runs/nope/iterations/1/diff",
      "/api/runs/nope/patch",
      "/api/runs/nope/artifacts",
    ]) {
      const res = await h.request("GET", path);
      expect(res.status, path).toBe(404);
      expect(res.body.error.code).toBe("not_found");
    }
    // A route that takes no query parameters ignores them (a cache-buster).
    const patched = await h.app.request(`/api/runs/${id}/patch?x=1`);
    expect(patched.status).toBe(200);
    expect(await patched.text()).toContain("diff --git");
  });

  it("answers a patch larger than the workers store with 404 and the git command that gives it", async () => {
    const submitted = await h.request("POST", "/api/runs", {
      task: "a large change",
      agent: { type: "command", command: "true" },
      testCommand: "true",
    });
    expect(submitted.status).toBe(202);
    const id: string = submitted.body.id;
    const none = await h.request("GET", `/api/runs/${id}/patch`);
    expect(none).toMatchObject({
      status: 404,
      body: {
        error: {
          code: "not_found",
          message: `run ${id} has no patch yet: no iteration has been snapshotted`,
        },
      },
    });
    const { epoch } = (await h.store.claimRun(id))!.run;
    const [base, head] = ["a".repeat(40), "b".repeat(40)];
    await h.store.commit(
      id,
      epoch,
      {
        change: {
          runId: id,
          baselineSnapshot: base,
          headSnapshot: head,
          iteration: 1,
          files: ["big.bin"],
          stat: "",
          patch: null,
          patchBytes: 9_988_081,
          updatedAt: 1,
        },
      },
      Date.now(),
    );
    const sessionId = submitted.body.sessionId as string;
    const large = h.appWith({ snapshotsDir: "/srv/looprun/snapshots" });
    const res = await large.request(`/api/runs/${id}/patch`);
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({
      error: {
        code: "not_found",
        message: `the patch of run ${id} is 9988081 bytes, more than the workers store; it lies between the snapshots ${base} and ${head}: git --git-dir=/srv/looprun/snapshots/${sessionId}.git diff --binary ${base} ${head}`,
        baselineSnapshot: base,
        headSnapshot: head,
      },
    });
  });

  it("validates the review and phases fields, naming them", async () => {
    const base = { task: "t", agent: { type: "command", command: "true" } };
    const cases: [unknown, string][] = [
      [{ type: "command" }, "review.command"],
      [{ type: "command", command: "x", model: "m" }, "review.model"],
      [{ type: "triangular", command: "x" }, "review.command"],
      [{ type: "llm" }, "review.type"],
    ];
    for (const [review, path] of cases) {
      const res = await h.request("POST", "/api/runs", { ...base, review });
      expect(res.status, JSON.stringify(review)).toBe(400);
      expect(res.body.error.issues.map((i: { path: string }) => i.path)).toContain(path);
    }
    const phases = await h.request("POST", "/api/runs", {
      ...base,
      testCommand: "true",
      phases: ["design", "planning"],
    });
    expect(phases.status).toBe(400);
    expect(phases.body.error.issues[0].path).toBe("phases");
    // A reviewer is a gate by itself.
    const gated = await h.request("POST", "/api/runs", { ...base, review: { type: "mistral" } });
    expect(gated.status).toBe(202);
  });

  it("GET /api/stats: convergence across runs in a time window", async () => {
    const day = Date.UTC(2001, 0, 1);
    const store = h.store;
    const make = async (
      hour: number,
      status: RunStatus,
      reason: string | null,
      iterations: number,
      durations: number[],
    ) => {
      const createdAt = day + hour * 3_600_000;
      const spec = normalizeSubmission(
        RunSubmission.parse({
          task: "t",
          agent: { type: "command", command: "true" },
          testCommand: "true",
        }),
      );
      const run = await h.repo.createRun({
        id: `01STATS${String(hour).padStart(19, "0")}`,
        sessionId: `stats-${hour}`,
        sessionWorkspace: "/tmp/x",
        workspace: "/tmp/x",
        spec,
        createdAt,
      });
      const { epoch } = (await store.claimRun(run.id))!.run;
      let t = createdAt;
      for (const [i, ms] of durations.entries()) {
        await store.commit(
          run.id,
          epoch,
          {
            insertIteration: {
              runId: run.id,
              n: i + 1,
              attempt: 1,
              status: i === durations.length - 1 && status === "succeeded" ? "passed" : "failed",
              outcome:
                i === durations.length - 1 && status === "succeeded"
                  ? "complete"
                  : "validation_failed",
              prompt: "p",
              agent: null,
              validation: [],
              reviewId: null,
              feedback: null,
              startedAt: t,
              finishedAt: t + ms,
            },
          },
          t,
        );
        t += ms;
      }
      const metrics = {
        iterations,
        validationFailures: Math.max(0, iterations - 1),
        reviewBlockings: 1,
        toolCalls: 0,
        toolFailures: 0,
        tokens: 0,
      };
      await store.commit(
        run.id,
        epoch,
        { run: { status, reason: reason as never, metrics, startedAt: createdAt, finishedAt: t } },
        t,
      );
    };
    await make(1, "succeeded", "success", 2, [1000, 3000]);
    await make(2, "succeeded", "success", 4, [500, 500, 500, 500]);
    await make(3, "failed", "max_iterations", 1, [2000]);
    await make(4, "failed", "max_iterations", 1, [2000]);
    await make(5, "failed", "error", 1, [2000]);
    await make(6, "stopped", "stopped", 0, []);

    const at = (hour: number) => new Date(day + hour * 3_600_000).toISOString();
    const all = await h.request("GET", `/api/stats?since=${at(0)}&until=${at(24)}`);
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({
      window: { since: at(0), until: at(24) },
      runs: { total: 6, byStatus: { succeeded: 2, failed: 3, stopped: 1, queued: 0, running: 0 } },
      successRate: 0.4,
      meanIterationsToConverge: 3,
      meanTimeToConvergeMs: 3000,
      meanIterationTimeMs: 1333,
      iterations: 9,
      validationFailures: 4,
      reviewBlockings: 6,
      commonFailureReasons: [
        { reason: "max_iterations", count: 2 },
        { reason: "error", count: 1 },
      ],
      iterationOutcomes: [
        { outcome: "validation_failed", count: 7 },
        { outcome: "complete", count: 2 },
      ],
    });
    // since is inclusive, until exclusive.
    const window = await h.request("GET", `/api/stats?since=${at(2)}&until=${at(4)}`);
    expect(window.body).toMatchObject({
      runs: { total: 2 },
      successRate: 0.5,
      meanIterationsToConverge: 4,
      commonFailureReasons: [{ reason: "max_iterations", count: 1 }],
    });
    const empty = await h.request("GET", `/api/stats?until=${at(0)}`);
    expect(empty.body).toMatchObject({
      window: { since: null },
      runs: { total: 0 },
      successRate: null,
      meanIterationTimeMs: null,
      commonFailureReasons: [],
    });
    expect((await h.request("GET", "/api/stats")).body.runs.total).toBeGreaterThanOrEqual(6);

    for (const [query, path] of [
      ["since=yesterday", "since"],
      [`since=${at(3)}&until=${at(3)}`, "until"],
      ["until=2001-01-01", "until"],
      ["runId=x", "runId"],
      [`since=${at(1)}&since=${at(2)}`, "since"],
    ]) {
      const res = await h.request("GET", `/api/stats?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body.error).toMatchObject({ code: "invalid_request", issues: [{ path }] });
    }
  });
});
