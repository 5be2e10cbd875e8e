import { describe, expect, inject, it } from "vitest";
import { parsePrometheusText, sampleValue } from "../apps/api/test/prometheus-text";
import { payload, type SseMessage, SseReader } from "../apps/api/test/sse-client";
import { ApiClient } from "../apps/cli/src/api-client";
import { watchRun } from "../apps/cli/src/commands/watch";
import { droppingProxy } from "./e2e-live-proxy";
import {
  cliEnvFor,
  commandRun,
  getEvents,
  runCli,
  submit,
  useStack,
  waitForStatus,
} from "./support/stack";

const COUNTER = "n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count";
const UNTIL_THREE = 'test "$(cat count)" -ge 3 || { echo "count is $(cat count)"; exit 1; }';

const stack = useStack(() => ({
  redisUrl: inject("redisUrl"),
  env: { LOOPRUN_SSE_POLL_MS: "100", LOOPRUN_SSE_HEARTBEAT_MS: "300" },
}));

async function openStream(path: string, headers: Record<string, string> = {}) {
  const abort = new AbortController();
  const res = await fetch(new URL(path, stack.url), { headers, signal: abort.signal });
  if (res.status !== 200 || !res.body)
    throw new Error(`${path} answered ${res.status}: ${await res.text()}`);
  expect(res.headers.get("content-type")).toContain("text/event-stream");
  return { sse: new SseReader(res.body), abort };
}

const seqs = (list: SseMessage[]) => list.map((m) => Number(m.id));

describe("live event stream over HTTP (API and worker processes)", () => {
  it("delivers a run's events in order as the worker writes them, resumes with Last-Event-ID, ends after run_finished", async () => {
    const { id } = await submit(
      stack,
      commandRun(COUNTER, { testCommand: UNTIL_THREE, cooldownMs: 200 }),
    );
    const whole = await openStream(`/api/runs/${id}/events/stream`);
    const partial = await openStream(`/api/runs/${id}/events/stream`);

    // A client that drops after the first iteration starts, then comes back with Last-Event-ID.
    const before = await partial.sse.until((m) => m.event === "iteration_started");
    partial.abort.abort();
    const lastSeen = before.at(-1)?.id as string;
    const resumed = await openStream(`/api/runs/${id}/events/stream`, {
      "Last-Event-ID": lastSeen,
    });
    const after = await resumed.sse.rest();

    const all = await whole.sse.rest();
    expect(await whole.sse.next()).toBeNull();
    expect(all.at(-1)?.event).toBe("run_finished");
    expect(payload(all.at(-1) as SseMessage).data).toMatchObject({
      status: "succeeded",
      reason: "success",
    });
    expect(seqs(all)).toEqual(all.map((_, i) => i + 1));
    for (const m of all) expect(m.event).toBe(payload(m).type);
    expect(all.map(payload)).toEqual(await getEvents(stack, id));
    expect(all.filter((m) => m.event === "iteration_started")).toHaveLength(3);

    // No gap, no duplicate across the reconnection.
    expect([...seqs(before), ...seqs(after)]).toEqual(seqs(all));
  });

  it("pings while the agent works, and ends with the stopped run's run_finished", async () => {
    const { id } = await submit(stack, commandRun("sleep 60", { testCommand: "true" }));
    await waitForStatus(stack, id, ["running"]);
    const { sse } = await openStream(`/api/runs/${id}/events/stream`);
    let m = await sse.next();
    while (m && m.comment !== "ping") m = await sse.next();
    expect(m).toEqual({ comment: "ping" });

    expect((await stack.api("POST", `/api/runs/${id}/stop`)).status).toBe(202);
    const rest = await sse.rest();
    expect(rest.at(-1)?.event).toBe("run_finished");
    expect(payload(rest.at(-1) as SseMessage).data).toMatchObject({ status: "stopped" });
    expect(await sse.next()).toBeNull();
  });

  it("streams run_updated for list views as a run goes queued → running → succeeded", async () => {
    const { sse, abort } = await openStream("/api/runs/stream");
    const { id } = await submit(
      stack,
      commandRun(COUNTER, { testCommand: UNTIL_THREE, sessionId: "live-list" }),
    );
    const updates = await sse.until(
      (m) => payload(m).id === id && payload(m).status === "succeeded",
    );
    abort.abort();
    const mine = updates.filter((m) => payload(m).id === id);
    expect(mine.every((m) => m.event === "run_updated")).toBe(true);
    const statuses = mine
      .map((m) => payload(m).status as string)
      .filter((s, i, a) => s !== a[i - 1]);
    expect(statuses).toEqual(["queued", "running", "succeeded"].slice(3 - statuses.length));
    expect(statuses.at(-1)).toBe("succeeded");
    expect(payload(mine.at(-1) as SseMessage)).toMatchObject({
      sessionId: "live-list",
      iteration: 3,
      reason: "success",
    });
  });

  it("404s (JSON) for an unknown run before streaming", async () => {
    const res = await stack.api("GET", "/api/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/events/stream");
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe("not_found");
  });
});

describe("looprun watch over SSE", () => {
  it("reconnects with Last-Event-ID when the stream drops, printing each event once, and exits 0 on success", async () => {
    const proxy = await droppingProxy(stack.url, 3);
    try {
      const { id } = await submit(
        stack,
        commandRun(COUNTER, { testCommand: UNTIL_THREE, cooldownMs: 300 }),
      );
      const { code, stdout, output } = await runCli(["watch", id], {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        LOOPRUN_URL: proxy.url,
      });
      expect(code, output).toBe(0);
      expect(proxy.streamRequests[0]).toBeUndefined();
      expect(proxy.streamRequests[1]).toBe("3");
      for (const n of [1, 2, 3]) {
        expect(
          stdout.split("\n").filter((l) => l.includes(`iteration ${n} started`)),
          stdout,
        ).toHaveLength(1);
      }
      const lines = stdout.split("\n").filter((l) => /^\[\d\d:\d\d\] /.test(l));
      expect(lines).toHaveLength((await getEvents(stack, id)).length);
      expect(stdout).toContain("finished: succeeded (success)");
      expect(stdout).toMatch(
        new RegExp(`run ${id} succeeded \\(success\\) .* · 3 iterations · \\d\\d:\\d\\d\\n$`),
      );
      // Not a TTY: no progress line, no terminal control sequences.
      expect(stdout).not.toContain("\x1b[");
    } finally {
      await proxy.close();
    }
  });

  it("submit --watch exits 1 when the run fails", async () => {
    const { code, stdout } = await runCli(
      [
        "submit",
        "--task",
        "fails",
        "--agent",
        "true",
        "--test",
        "exit 3",
        "--max-iterations",
        "1",
        "--cooldown",
        "0",
        "--watch",
      ],
      cliEnvFor(stack.url),
    );
    expect(code, stdout).toBe(1);
    expect(stdout).toContain("finished: failed (max_iterations)");
    expect(stdout).toMatch(/run [0-9A-Z]{26} failed \(max_iterations\)/);
  });

  it("draws a live progress line on a TTY", async () => {
    const { id } = await submit(
      stack,
      commandRun(COUNTER, { testCommand: UNTIL_THREE, maxIterations: 5 }),
    );
    let text = "";
    const tty = { isTTY: true, write: (s: string) => (text += s) };
    const run = await watchRun(new ApiClient(stack.url), id, tty);
    expect(run.status).toBe("succeeded");
    expect(text).toMatch(/▸ iteration 1 of 5 · \S.* · \d\d:\d\d elapsed/);
    expect(text).toContain("▸ iteration 3 of 5");
    expect(text).toContain("\r\x1b[2K");
    // The progress line is cleared before the outcome.
    expect(text).toMatch(new RegExp(`\\r\\x1b\\[2Krun ${id} succeeded`));
  });
});

describe("metrics and the OpenAPI document over HTTP", () => {
  it("GET /metrics parses as Prometheus text and counts what the workers did", async () => {
    const { id } = await submit(stack, commandRun(COUNTER, { testCommand: UNTIL_THREE }));
    await waitForStatus(stack, id, ["succeeded"]);
    const res = await fetch(new URL("/metrics", stack.url));
    expect(res.status).toBe(200);
    const { samples, types } = parsePrometheusText(await res.text());
    expect(types.get("looprun_iteration_duration_seconds")).toBe("histogram");
    expect(types.get("looprun_phase_duration_seconds")).toBe("histogram");
    expect(sampleValue(samples, "looprun_runs", { status: "succeeded" })).toBeGreaterThanOrEqual(1);
    expect(
      sampleValue(samples, "looprun_iterations_total", { outcome: "complete" }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      sampleValue(samples, "looprun_iterations_total", { outcome: "validation_failed" }),
    ).toBeGreaterThanOrEqual(2);
    expect(
      sampleValue(samples, "looprun_phase_duration_seconds_count", { phase: "agent" }),
    ).toBeGreaterThanOrEqual(3);
    expect(
      sampleValue(samples, "looprun_phase_duration_seconds_count", { phase: "validation" }),
    ).toBeGreaterThanOrEqual(3);
    for (const state of ["waiting", "active", "delayed"]) {
      expect(sampleValue(samples, "looprun_queue_jobs", { state }), state).toBeGreaterThanOrEqual(
        0,
      );
    }
    expect(sampleValue(samples, "looprun_queue_up")).toBe(1);
    expect(sampleValue(samples, "looprun_tokens_total")).toBeGreaterThanOrEqual(0);
    expect(types.get("looprun_tool_calls_total")).toBe("counter");
  });

  it("GET /api/openapi.json answers the document", async () => {
    const res = await stack.api("GET", "/api/openapi.json");
    expect(res.status).toBe(200);
    expect(res.body.openapi).toBe("3.1.0");
    expect(Object.keys(res.body.paths)).toEqual(
      expect.arrayContaining(["/api/runs/{id}/events/stream", "/metrics"]),
    );
  });
});

// Last in this file: it stops the stack's API.
describe("shutdown", () => {
  it("ends open event streams so that the API exits at once on SIGTERM", async () => {
    const { id } = await submit(stack, commandRun("sleep 60", { testCommand: "true" }));
    await waitForStatus(stack, id, ["running"]);
    // More streams at once than an AbortSignal's listener limit (10): each holds the server's
    // shutdown signal, with no warning for it.
    const streams = [];
    for (let i = 0; i < 6; i++) {
      streams.push(await openStream(`/api/runs/${id}/events/stream`));
      streams.push(await openStream("/api/runs/stream"));
    }
    for (const { sse } of streams.filter((_, i) => i % 2 === 0)) {
      await sse.until((m) => m.event === "agent_started");
    }
    // Without the streams ending, the server would wait for them until its grace (5 s) cut them.
    expect(await stack.apiProcess.stop("SIGTERM")).toEqual({ code: 0, signal: null });
    expect(stack.apiProcess.output()).not.toContain("connections still open, cut");
    // Every stream ends (whatever it still had to send): the server closed them.
    for (const { sse } of streams) {
      await sse.rest();
      expect(await sse.next()).toBeNull();
    }
    expect(stack.apiProcess.output()).not.toContain("MaxListenersExceededWarning");
  });
});
