import { AGENT_TOOL_NAMES, RUN_STATUSES } from "@looprun/core";
import type { FinishedIteration, MetricsReader, RunRepositoryPort } from "@looprun/db";
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { RunQueue } from "../run-queue";

const SECONDS = [0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

const byteOrder = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** A total order on what the metrics see of an iteration. */
function byContent(a: FinishedIteration, b: FinishedIteration): number {
  return (
    a.finishedAt - b.finishedAt ||
    a.startedAt - b.startedAt ||
    byteOrder(a.outcome ?? a.status, b.outcome ?? b.status) ||
    (a.agentMs ?? -1) - (b.agentMs ?? -1) ||
    (a.validationMs ?? -1) - (b.validationMs ?? -1)
  );
}

export interface MetricsSources {
  repo: Pick<RunRepositoryPort, "metricsReader">;
  queue: Pick<RunQueue, "jobCounts">;
}

/**
 * Prometheus metrics derived from the database (workers write it; the API runs no iteration).
 * Gauges are read on each scrape with cheap aggregate queries; iterations and tool calls are
 * read incrementally (see `MetricsReader`), so a scrape only reads what is new since the last.
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

  private readonly reader: MetricsReader;
  /** The database's token sum at the previous read (null before the first). */
  private tokenTotal: number | null = null;
  private last: Promise<unknown> = Promise.resolve();

  constructor(private readonly sources: MetricsSources) {
    this.reader = sources.repo.metricsReader();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The metrics in Prometheus' text format, brought up to date first. */
  scrape(): Promise<string> {
    // One at a time: the reader's cursors move with each read (concurrent scrapes would race).
    const next = this.last
      .catch(() => {})
      .then(async () => {
        await this.refreshFromDb();
        await this.refreshQueue();
        return this.registry.metrics();
      });
    this.last = next;
    return next;
  }

  private async refreshFromDb(): Promise<void> {
    const finished: FinishedIteration[] = [];
    const read = await this.reader.read((it) => finished.push(it));
    // In one canonical order, whatever order the engine read them in: a label's series is
    // created by its first observation, and the text lists series in that order.
    for (const it of finished.sort(byContent)) this.observe(it);
    this.runs.reset();
    for (const status of RUN_STATUSES) this.runs.set({ status }, 0);
    for (const row of read.runCountsByStatus) this.runs.set({ status: row.status }, row.count);

    // The counter adds what the sum grew by: it never goes back when retention deletes runs
    // (their tokens leave the sum; tokens spent between the same two scrapes are then not
    // counted), nor below zero (a database written before usage counts were checked may hold a
    // negative sum).
    this.tokens.inc(Math.max(0, read.tokenTotal - (this.tokenTotal ?? 0)));
    this.tokenTotal = read.tokenTotal;

    const calls = [...read.newToolCalls].sort((a, b) =>
      byteOrder(`${a.server}\0${a.tool}`, `${b.server}\0${b.tool}`),
    );
    for (const c of calls) {
      const labels = { server: c.server, tool: toolLabel(c.server, c.tool) };
      this.toolCalls.inc(labels, c.calls);
      // Created at 0 too, so every tool has both series.
      this.toolFailures.inc(labels, c.failures);
    }
  }

  private observe(it: FinishedIteration): void {
    // An abandoned attempt is `abandoned`, whatever ended its run (a stop gives it `stopped`).
    const outcome = it.status === "abandoned" ? it.status : (it.outcome ?? it.status);
    this.iterations.inc({ outcome });
    this.iterationSeconds.observe(Math.max(0, it.finishedAt - it.startedAt) / 1000);
    if (it.agentMs !== null) this.phaseSeconds.observe({ phase: "agent" }, it.agentMs / 1000);
    if (it.validationMs !== null) {
      this.phaseSeconds.observe({ phase: "validation" }, it.validationMs / 1000);
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

/**
 * A call's tool as a label: a name the model made up (no server has it, server "") would be
 * a series of its own for good, one per invention; they all count as "unknown". The mistral
 * agent's own tools (`finish`, `update_step`, server "" too) keep their names.
 */
function toolLabel(server: string, tool: string): string {
  return server === "" && !AGENT_TOOL_NAMES.includes(tool) ? "unknown" : tool;
}
