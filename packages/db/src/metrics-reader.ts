import { isAbandonedAgent, isTerminal, type RunStatus } from "@looprun/core";
import type { Db } from "./connection";
import {
  type IterationSample,
  iterationsAfter,
  runCountsByStatus,
  tokenTotal,
  toolCallsAfter,
} from "./live-queries";
import type { MaybePromise } from "./repository";

/** An iteration attempt that has finished (passed, failed or abandoned), as the metrics see it. */
export interface FinishedIteration {
  status: string;
  outcome: string | null;
  startedAt: number;
  finishedAt: number;
  /** How long its agent ran; null when it has no agent result (or an abandoned one's stand-in). */
  agentMs: number | null;
  /** How long its validation commands ran together; null when none ran. */
  validationMs: number | null;
}

export interface ToolCallCount {
  server: string;
  tool: string;
  calls: number;
  failures: number;
}

export interface MetricsRead {
  runCountsByStatus: { status: string; count: number }[];
  tokenTotal: number;
  /** Tool calls made since the previous read (all of them at the first), per server and tool. */
  newToolCalls: ToolCallCount[];
}

/**
 * What the Prometheus metrics read from the database, incrementally: a reader remembers what
 * it has returned, so that each finished iteration and each tool call is counted exactly once
 * across reads, and a read costs what is new rather than the whole history.
 */
export interface MetricsReader {
  /** Calls `visit` with every iteration finished since the previous read (all at the first). */
  read(visit: (iteration: FinishedIteration) => void): MaybePromise<MetricsRead>;
}

const PAGE = 2000;

export function toFinishedIteration(row: IterationSample): FinishedIteration | null {
  if (row.finishedAt === null) return null;
  return {
    status: row.status,
    outcome: row.outcome,
    startedAt: row.startedAt,
    finishedAt: row.finishedAt,
    // An abandoned agent's stand-in result times when it was found, not the agent's run.
    agentMs: row.agent && !isAbandonedAgent(row.agent) ? row.agent.durationMs : null,
    validationMs:
      row.validation.length > 0 ? row.validation.reduce((sum, v) => sum + v.durationMs, 0) : null,
  };
}

/**
 * SQLite: iterations and tool calls are read by rowid. Rows are only ever appended, by writers
 * that the database serialises, so a rowid cursor misses nothing; an iteration still running
 * holds the iteration cursor back until it finishes (or its run ends without it).
 */
export class SqliteMetricsReader implements MetricsReader {
  /** Every iteration at or below it is settled (counted, or never to finish). */
  private iterationCursor = 0;
  /** Iterations above the cursor already counted. */
  private readonly counted = new Set<number>();
  private toolCallCursor = 0;

  constructor(private readonly db: Db) {}

  read(visit: (iteration: FinishedIteration) => void): MetricsRead {
    const calls = toolCallsAfter(this.db, this.toolCallCursor);
    this.toolCallCursor = calls.lastRowid;
    this.readIterations(visit);
    return {
      runCountsByStatus: runCountsByStatus(this.db),
      tokenTotal: tokenTotal(this.db),
      newToolCalls: calls.counts,
    };
  }

  private readIterations(visit: (iteration: FinishedIteration) => void): void {
    let after = this.iterationCursor;
    let frontierOpen = true;
    for (;;) {
      const rows = iterationsAfter(this.db, after, PAGE);
      for (const row of rows) {
        after = row.rowid;
        const finished = toFinishedIteration(row);
        if (finished && !this.counted.has(row.rowid)) {
          visit(finished);
          this.counted.add(row.rowid);
        }
        // An unfinished iteration of a finished run never finishes: it no longer holds the cursor.
        const settled = finished !== null || isTerminal(row.runStatus as RunStatus);
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
}
