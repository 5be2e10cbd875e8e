import type { IterationRecord } from "@looprun/core";
import { beforeAll, describe, expect, it } from "vitest";
import { type ApiHarness, ENGINES, useApiHarness } from "./api-harness";
import { parsePrometheusText, sampleValue } from "./prometheus-text";

const budget = { elapsedMs: 0, remainingIterations: 6 };

describe.each(ENGINES)("GET /metrics on %s", (engine) => {
  const h = useApiHarness(engine);
  let store: ApiHarness["store"];
  beforeAll(async () => {
    store = h.store;
  });

  const scrape = async () => {
    const res = await h.app.request("/metrics");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/plain");
    const parsed = parsePrometheusText(await res.text());
    for (const s of parsed.samples) expect(s.name.startsWith("looprun_"), s.name).toBe(true);
    return parsed.samples;
  };

  const submit = async (sessionId: string) => {
    const res = await h.request("POST", "/api/runs", {
      task: "metrics",
      sessionId,
      agent: { type: "command", command: "true" },
      testCommand: "true",
    });
    expect(res.status).toBe(202);
    const claimed = await store.claimRun(res.body.id);
    return { id: res.body.id as string, epoch: claimed?.run.epoch ?? 0 };
  };

  const iteration = (runId: string, n: number, startedAt: number): IterationRecord => ({
    runId,
    n,
    attempt: 1,
    status: "running",
    outcome: null,
    prompt: "p",
    agent: null,
    validation: [],
    reviewId: null,
    feedback: null,
    startedAt,
    finishedAt: null,
  });

  const finishIteration = (
    id: string,
    epoch: number,
    n: number,
    outcome: "complete" | "validation_failed",
    t: number,
  ) =>
    store.commit(
      id,
      epoch,
      {
        updateIteration: {
          n,
          attempt: 1,
          patch: {
            status: outcome === "complete" ? "passed" : "failed",
            outcome,
            agent: { exitCode: 0, output: "", durationMs: 1500 },
            validation: [{ command: "true", exitCode: 0, durationMs: 250, output: "" }],
            finishedAt: t + 2000,
          },
        },
      },
      t,
    );

  it("exposes runs by status, queue depth, iterations with their durations, tool calls and tokens", async () => {
    const before = await scrape();
    expect(sampleValue(before, "looprun_runs", { status: "succeeded" })).toBe(0);
    expect(sampleValue(before, "looprun_queue_up")).toBe(1);
    expect(sampleValue(before, "looprun_queue_jobs", { state: "waiting" })).toBe(0);
    expect(sampleValue(before, "looprun_queue_jobs", { state: "active" })).toBe(0);
    expect(sampleValue(before, "looprun_queue_jobs", { state: "delayed" })).toBe(0);
    expect(sampleValue(before, "looprun_tokens_total")).toBe(0);

    const t = Date.now();
    const a = await submit("metrics-a");
    await store.commit(
      a.id,
      a.epoch,
      {
        run: {
          status: "running",
          startedAt: t,
          metrics: {
            iterations: 0,
            validationFailures: 0,
            reviewBlockings: 0,
            toolCalls: 2,
            toolFailures: 1,
            tokens: 1234,
          },
        },
        insertIteration: iteration(a.id, 1, t),
        toolCalls: [
          {
            iteration: 1,
            server: "workspace",
            tool: "write_file",
            args: {},
            isError: false,
            result: "ok",
            durationMs: 4,
          },
          {
            iteration: 1,
            server: "workspace",
            tool: "write_file",
            args: {},
            isError: true,
            result: "denied",
            durationMs: 2,
          },
        ],
        events: [{ type: "run_started", data: { budget } }],
      },
      t,
    );
    const b = await submit("metrics-b");

    const running = await scrape();
    expect(sampleValue(running, "looprun_runs", { status: "running" })).toBe(1);
    expect(sampleValue(running, "looprun_runs", { status: "queued" })).toBe(1);
    expect(sampleValue(running, "looprun_queue_jobs", { state: "waiting" })).toBe(2);
    expect(
      sampleValue(running, "looprun_tool_calls_total", { server: "workspace", tool: "write_file" }),
    ).toBe(2);
    expect(
      sampleValue(running, "looprun_tool_call_failures_total", {
        server: "workspace",
        tool: "write_file",
      }),
    ).toBe(1);
    expect(sampleValue(running, "looprun_tokens_total")).toBe(1234);
    // A running iteration is not counted yet.
    expect(sampleValue(running, "looprun_iteration_duration_seconds_count") ?? 0).toBe(0);

    await finishIteration(a.id, a.epoch, 1, "validation_failed", t);
    await store.commit(a.id, a.epoch, { insertIteration: iteration(a.id, 2, t + 3000) }, t);
    await store.commit(
      b.id,
      b.epoch,
      { run: { status: "running", startedAt: t }, insertIteration: iteration(b.id, 1, t) },
      t,
    );
    await finishIteration(b.id, b.epoch, 1, "complete", t);

    const later = await scrape();
    expect(sampleValue(later, "looprun_iterations_total", { outcome: "validation_failed" })).toBe(
      1,
    );
    expect(sampleValue(later, "looprun_iterations_total", { outcome: "complete" })).toBe(1);
    expect(sampleValue(later, "looprun_iteration_duration_seconds_count")).toBe(2);
    expect(sampleValue(later, "looprun_iteration_duration_seconds_sum")).toBe(4);
    expect(sampleValue(later, "looprun_iteration_duration_seconds_bucket", { le: "2" })).toBe(2);
    expect(sampleValue(later, "looprun_iteration_duration_seconds_bucket", { le: "1" })).toBe(0);
    expect(sampleValue(later, "looprun_phase_duration_seconds_count", { phase: "agent" })).toBe(2);
    expect(sampleValue(later, "looprun_phase_duration_seconds_sum", { phase: "agent" })).toBe(3);
    expect(sampleValue(later, "looprun_phase_duration_seconds_sum", { phase: "validation" })).toBe(
      0.5,
    );

    // Scraping again counts nothing twice; the iteration that finishes later is counted once.
    await finishIteration(a.id, a.epoch, 2, "complete", t);
    await scrape();
    const last = await scrape();
    expect(sampleValue(last, "looprun_iterations_total", { outcome: "complete" })).toBe(2);
    expect(sampleValue(last, "looprun_iterations_total", { outcome: "validation_failed" })).toBe(1);
    expect(sampleValue(last, "looprun_iteration_duration_seconds_count")).toBe(3);
    expect(
      sampleValue(last, "looprun_tool_calls_total", { server: "workspace", tool: "write_file" }),
    ).toBe(2);
  });

  it("counts an attempt abandoned by a stop as abandoned, not by its run's end", async () => {
    const t = Date.now();
    const run = await submit("metrics-stopped");
    await store.commit(
      run.id,
      run.epoch,
      { run: { status: "running", startedAt: t }, insertIteration: iteration(run.id, 1, t) },
      t,
    );
    const before = await scrape();
    // Its worker gone, the run is stopped with nobody holding it (the API's or a resumer's stop).
    await h.repo.requestStop(run.id, t + 1000);
    expect(await h.repo.finalizeStop(run.id, t + 2000)).toMatchObject({ status: "stopped" });
    const after = await scrape();
    const count = (samples: typeof after, outcome: string) =>
      sampleValue(samples, "looprun_iterations_total", { outcome }) ?? 0;
    expect(count(after, "abandoned") - count(before, "abandoned")).toBe(1);
    expect(count(after, "stopped")).toBe(count(before, "stopped"));
    // Its agent was what ran: the stand-in result it was given (the 2 s until the stop) is no
    // agent's run time.
    expect((await h.repo.listIterations(run.id))[0]?.agent).toMatchObject({
      exitCode: null,
      durationMs: 2000,
    });
    const agentRuns = (samples: typeof after) =>
      sampleValue(samples, "looprun_phase_duration_seconds_count", { phase: "agent" }) ?? 0;
    expect(agentRuns(after)).toBe(agentRuns(before));
  });

  it("counts calls of tools no server has (names the model made up) under one label, the agent's own under theirs", async () => {
    const t = Date.now();
    const run = await submit("metrics-unknown");
    const madeUp = (tool: string) => ({
      iteration: 1,
      server: "",
      tool,
      args: {},
      isError: true,
      result: `unknown tool "${tool}"`,
      durationMs: 1,
    });
    await store.commit(
      run.id,
      run.epoch,
      {
        run: { status: "running", startedAt: t },
        insertIteration: iteration(run.id, 1, t),
        // A malformed call of the agent's own finish is stored as these are (server ""), and
        // keeps its name: it is no invention.
        toolCalls: [madeUp("invented_one"), madeUp("invented_two"), madeUp("finish")],
      },
      t,
    );
    const samples = await scrape();
    expect(sampleValue(samples, "looprun_tool_calls_total", { server: "", tool: "unknown" })).toBe(
      2,
    );
    expect(
      sampleValue(samples, "looprun_tool_call_failures_total", { server: "", tool: "unknown" }),
    ).toBe(2);
    expect(samples.some((s) => s.labels.tool?.startsWith("invented"))).toBe(false);
    expect(
      sampleValue(samples, "looprun_tool_call_failures_total", { server: "", tool: "finish" }),
    ).toBe(1);
  });

  it("still answers when the stored token counts sum below zero (a server reported negative usage, before it was checked)", async () => {
    const counted = sampleValue(await scrape(), "looprun_tokens_total");
    const run = await submit("metrics-negative-tokens");
    const metrics = {
      iterations: 0,
      validationFailures: 0,
      reviewBlockings: 0,
      toolCalls: 0,
      toolFailures: 0,
      tokens: -10_000_000,
    };
    await store.commit(run.id, run.epoch, { run: { metrics } }, Date.now());
    // A counter does not go back (as when retention deletes runs and their tokens).
    expect(sampleValue(await scrape(), "looprun_tokens_total")).toBe(counted);
    // Tokens spent afterwards count.
    const next = await submit("metrics-more-tokens");
    await store.commit(
      next.id,
      next.epoch,
      { run: { metrics: { ...metrics, tokens: 5 } } },
      Date.now(),
    );
    expect(sampleValue(await scrape(), "looprun_tokens_total")).toBe((counted ?? 0) + 5);
  });

  it("needs the bearer token when API_TOKEN is set", async () => {
    const token = "metrics-token-0123456789";
    const secured = h.appWith({
      apiToken: token,
    });
    expect((await secured.request("/metrics")).status).toBe(401);
    const ok = await secured.request("/metrics", { headers: { authorization: `Bearer ${token}` } });
    expect(ok.status).toBe(200);
    expect(parsePrometheusText(await ok.text()).types.get("looprun_runs")).toBe("gauge");
  });
});
