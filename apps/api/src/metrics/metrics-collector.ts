import { isTerminal, RUN_STATUSES, type RunStatus } from "@looprun/core";
import type { IterationSample, RunRepository } from "@looprun/db";
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { RunQueue } from "../run-queue";

const SECONDS = [0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];
const PAGE = 2000;

export interface MetricsSources {
  repo: Pick<RunRepository, "metrics">;
  queue: Pick<RunQueue, "jobCounts">;
}

/**
 * Prometheus metrics derived from the database (workers write it; the API runs no iteration).
 * Gauges are read on each scrape with cheap aggregate queries; iterations and tool calls are
 * appended rows, read incrementally by rowid, so a scrape only reads what is new since the last.
 */
export class MetricsCollector {
  readonly registry = new Registry();
  private readonly runs = new Gauge({
    name: "looprun_runs",
    help: "Runs by status",
    labelNames: ["status"] as const,
    registers: [this.registry],
  });
  private readonly iterations = new Counter({
    name: "looprun_iterations_total",
    help: "Iterations finished, by outcome (abandoned attempts as outcome=abandoned)",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  private readonly iterationSeconds = new Histogram({
    name: "looprun_iteration_duration_seconds",
    help: "Iteration wall time, from its start to its decision",
    buckets: SECONDS,
    registers: [this.registry],
  });
  private readonly phaseSeconds = new Histogram({
    name: "looprun_phase_duration_seconds",
    help: "Time spent in a phase of an iteration (validation: all its commands)",
    labelNames: ["phase"] as const,
    buckets: SECONDS,
    registers: [this.registry],
  });
  private readonly queueJobs = new Gauge({
    name: "looprun_queue_jobs",
    help: "Jobs in the run queue by state",
    labelNames: ["state"] as const,
    registers: [this.registry],
  });
  private readonly queueUp = new Gauge({
    name: "looprun_queue_up",
    help: "1 when the queue (Redis) answered this scrape",
    registers: [this.registry],
  });
  private readonly toolCalls = new Counter({
    name: "looprun_tool_calls_total",
    help: "MCP tool calls made by agents",
    labelNames: ["server", "tool"] as const,
    registers: [this.registry],
  });
  private readonly toolFailures = new Counter({
    name: "looprun_tool_call_failures_total",
    help: "MCP tool calls that returned an error",
    labelNames: ["server", "tool"] as const,
    registers: [this.registry],
  });
  private readonly tokens = new Counter({
    name: "looprun_tokens_total",
    help: "LLM tokens used by all runs",
    registers: [this.registry],
  });

  /** Every iteration at or below it is settled (counted, or never to finish). */
  private iterationCursor = 0;
  /** Iterations above the cursor already counted. */
  private readonly counted = new Set<number>();
  private toolCallCursor = 0;

  constructor(private readonly sources: MetricsSources) {}

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The metrics in Prometheus' text format, brought up to date first. */
  async scrape(): Promise<string> {
    this.refreshFromDb();
    await this.refreshQueue();
    return this.registry.metrics();
  }

  private refreshFromDb(): void {
    const { metrics } = this.sources.repo;
    this.runs.reset();
    for (const status of RUN_STATUSES) this.runs.set({ status }, 0);
    for (const row of metrics.runCountsByStatus()) this.runs.set({ status: row.status }, row.count);

    this.tokens.reset();
    this.tokens.inc(metrics.tokenTotal());

    const calls = metrics.toolCallsAfter(this.toolCallCursor);
    for (const c of calls.counts) {
      this.toolCalls.inc({ server: c.server, tool: c.tool }, c.calls);
      // Created at 0 too, so every tool has both series.
      this.toolFailures.inc({ server: c.server, tool: c.tool }, c.failures);
    }
    this.toolCallCursor = calls.lastRowid;

    this.readIterations();
  }

  private readIterations(): void {
    let after = this.iterationCursor;
    let frontierOpen = true;
    for (;;) {
      const rows = this.sources.repo.metrics.iterationsAfter(after, PAGE);
      for (const row of rows) {
        after = row.rowid;
        const finished = row.finishedAt !== null;
        if (finished && !this.counted.has(row.rowid)) {
          this.observe(row);
          this.counted.add(row.rowid);
        }
        // An unfinished iteration of a finished run never finishes: it no longer holds the cursor.
        const settled = finished || isTerminal(row.runStatus as RunStatus);
        if (frontierOpen && settled) {
          this.iterationCursor = row.rowid;
          this.counted.delete(row.rowid);
        } else {
          frontierOpen = false;
        }
      }
      if (rows.length < PAGE) return;
    }
  }

  private observe(row: IterationSample): void {
    this.iterations.inc({ outcome: row.outcome ?? row.status });
    if (row.finishedAt !== null) {
      this.iterationSeconds.observe(Math.max(0, row.finishedAt - row.startedAt) / 1000);
    }
    if (row.agent) this.phaseSeconds.observe({ phase: "agent" }, row.agent.durationMs / 1000);
    if (row.validation.length > 0) {
      const ms = row.validation.reduce((sum, v) => sum + v.durationMs, 0);
      this.phaseSeconds.observe({ phase: "validation" }, ms / 1000);
    }
  }

  private async refreshQueue(): Promise<void> {
    this.queueJobs.reset();
    try {
      const counts = await this.sources.queue.jobCounts();
      for (const [state, n] of Object.entries(counts)) this.queueJobs.set({ state }, n);
      this.queueUp.set(1);
    } catch {
      this.queueUp.set(0);
    }
  }
}
