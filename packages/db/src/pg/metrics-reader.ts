import { ABANDONED_AGENT_OUTPUT, ACTIVE_STATUSES, isActive } from "@looprun/core";
import { and, asc, inArray, isNotNull, type SQL, type SQLWrapper, sql } from "drizzle-orm";
import type {
  FinishedIteration,
  MetricsRead,
  MetricsReader,
  ToolCallCount,
} from "../metrics-reader";
import { ulidFloor } from "../ulid-floor";
import type { PgDb } from "./connection";
import { liveRuns } from "./live-queries";
import { iterations, runStatsDaily, runs, toolCalls } from "./schema";

type Tx = Parameters<Parameters<PgDb["transaction"]>[0]>[0];

/** How far back runs created between two reads are looked for (clock skew between API hosts). */
const CREATED_WINDOW_MS = 5 * 60_000;
const PAGE = 2000;

/** What the reader remembers of a run it watches. */
interface Watched {
  active: boolean;
  /** `n:attempt` of its iterations already counted. */
  counted: Set<string>;
  /** The highest seq of its tool calls already counted. */
  toolSeq: number;
}

/** `column = any($1)`: one array parameter, however many runs are watched. */
const anyOf = (column: SQLWrapper, ids: readonly string[]) =>
  sql`${column} = any(${sql.param([...ids])}::text[])`;

const key = (n: number, attempt: number) => `${n}:${attempt}`;

const finishedColumns = {
  runId: iterations.runId,
  n: iterations.n,
  attempt: iterations.attempt,
  status: iterations.status,
  outcome: iterations.outcome,
  startedAt: iterations.startedAt,
  finishedAt: sql<number>`${iterations.finishedAt}`.mapWith(Number),
  // An abandoned agent's stand-in result (isAbandonedAgent) times when it was found: none.
  agentMs: sql<number | null>`case when ${iterations.agent} ->> 'output' = ${ABANDONED_AGENT_OUTPUT}
    and ${iterations.agent} ->> 'exitCode' is null then null
    else (${iterations.agent} ->> 'durationMs')::float8 end`,
  validationMs: sql<number | null>`case when json_array_length(${iterations.validation}) > 0
    then (select sum((v ->> 'durationMs')::float8) from json_array_elements(${iterations.validation}) v)
    end`,
};

/**
 * The metrics' reads on PostgreSQL. There is no rowid here, and writers commit in any order,
 * so no cursor over the whole table can tell what is new. But an iteration only finishes, and
 * a tool call is only made, in a run that is active — or was created since the last read. So
 * a read looks at the runs active at the previous read, those active now and those created
 * since (liveRuns), and remembers per run which iterations it counted and the seq of the last
 * tool call (seqs of a run are assigned in commit order under its row lock). The first read
 * counts the whole history. Each read is one REPEATABLE READ snapshot, and what it saw is
 * handed out only once it has ended: a read that fails counts nothing.
 */
export class PgMetricsReader implements MetricsReader {
  /** Runs watched since the previous read; null before the first. */
  private watched: Map<string, Watched> | null = null;

  constructor(
    private readonly db: PgDb,
    private readonly now: () => number = Date.now,
  ) {}

  async read(visit: (iteration: FinishedIteration) => void): Promise<MetricsRead> {
    const finished: FinishedIteration[] = [];
    const { read, watched } = await this.db.transaction(
      async (tx) => {
        const previous = this.watched;
        const activeIds = [...(previous ?? [])].filter(([, w]) => w.active).map(([id]) => id);
        const live = await liveRuns(tx, activeIds, ulidFloor(this.now() - CREATED_WINDOW_MS));
        const watched = new Map<string, Watched>();
        for (const run of live) {
          const before = previous?.get(run.id);
          watched.set(run.id, {
            active: isActive(run.status),
            counted: new Set(before?.counted),
            toolSeq: before?.toolSeq ?? 0,
          });
        }
        const newToolCalls =
          previous === null
            ? await this.readHistory(tx, watched, finished)
            : await this.readWatched(tx, watched, finished);
        const read: MetricsRead = {
          runCountsByStatus: await runCountsByStatus(tx),
          tokenTotal: await tokenTotal(tx),
          newToolCalls,
        };
        return { read, watched };
      },
      { isolationLevel: "repeatable read", accessMode: "read only" },
    );
    this.watched = watched;
    for (const it of finished) visit(it);
    return read;
  }

  /** The first read: every finished iteration and every tool call so far. */
  private async readHistory(
    tx: Tx,
    watched: Map<string, Watched>,
    out: FinishedIteration[],
  ): Promise<ToolCallCount[]> {
    let after: SQL | undefined;
    for (;;) {
      const rows = await tx
        .select(finishedColumns)
        .from(iterations)
        .where(and(after, isNotNull(iterations.finishedAt)))
        .orderBy(asc(iterations.runId), asc(iterations.n), asc(iterations.attempt))
        .limit(PAGE);
      for (const row of rows) {
        out.push(toFinished(row));
        watched.get(row.runId)?.counted.add(key(row.n, row.attempt));
      }
      const last = rows.at(-1);
      if (rows.length < PAGE || !last) break;
      after = sql`(${iterations.runId}, ${iterations.n}, ${iterations.attempt}) > (${last.runId}, ${last.n}, ${last.attempt})`;
    }
    if (watched.size > 0) {
      const seqs = await tx
        .select({ runId: toolCalls.runId, seq: sql<number>`max(${toolCalls.seq})` })
        .from(toolCalls)
        .where(anyOf(toolCalls.runId, [...watched.keys()]))
        .groupBy(toolCalls.runId);
      for (const s of seqs) {
        const w = watched.get(s.runId);
        if (w) w.toolSeq = Number(s.seq);
      }
    }
    return toolCallCounts(tx, undefined);
  }

  /** A later read: what is new in the runs it watches. */
  private async readWatched(
    tx: Tx,
    watched: Map<string, Watched>,
    out: FinishedIteration[],
  ): Promise<ToolCallCount[]> {
    if (watched.size === 0) return [];
    const ids = [...watched.keys()];
    const rows = await tx
      .select(finishedColumns)
      .from(iterations)
      .where(and(anyOf(iterations.runId, ids), isNotNull(iterations.finishedAt)));
    for (const row of rows) {
      const w = watched.get(row.runId);
      const k = key(row.n, row.attempt);
      if (!w || w.counted.has(k)) continue;
      w.counted.add(k);
      out.push(toFinished(row));
    }
    // Per run: its calls above the seq already counted.
    const seqs = ids.map((id) => watched.get(id)?.toolSeq ?? 0);
    const newer = sql`join unnest(${sql.param(ids)}::text[], ${sql.param(seqs)}::int[])
      as c(run_id, after) on c.run_id = tool_calls.run_id and tool_calls.seq > c.after`;
    const last = await tx.execute<{ run_id: string; last: number }>(
      sql`select tool_calls.run_id, max(tool_calls.seq) as last from tool_calls ${newer}
          group by tool_calls.run_id`,
    );
    const counts = await toolCallCounts(tx, newer);
    for (const row of last.rows) {
      const w = watched.get(row.run_id);
      if (w) w.toolSeq = Number(row.last);
    }
    return counts;
  }
}

function toFinished(row: {
  status: string;
  outcome: string | null;
  startedAt: number;
  finishedAt: number;
  agentMs: number | null;
  validationMs: number | null;
}): FinishedIteration {
  return {
    status: row.status,
    outcome: row.outcome,
    startedAt: row.startedAt,
    finishedAt: row.finishedAt,
    agentMs: row.agentMs,
    validationMs: row.validationMs,
  };
}

/** Tool calls per server and tool (all of them, or those the `join` keeps). */
async function toolCallCounts(tx: Tx, join: SQL | undefined): Promise<ToolCallCount[]> {
  const result = await tx.execute<ToolCallCount & Record<string, unknown>>(
    sql`select tool_calls.server, tool_calls.tool, count(*)::float8 as calls,
          (count(*) filter (where tool_calls.is_error))::float8 as failures
        from tool_calls ${join ?? sql``}
        group by tool_calls.server, tool_calls.tool`,
  );
  return result.rows.map((r) => ({
    server: r.server,
    tool: r.tool,
    calls: r.calls,
    failures: r.failures,
  }));
}

/** Finished runs from the daily sums (drizzle-pg/0008), active ones from their rows. */
async function runCountsByStatus(tx: Tx): Promise<{ status: string; count: number }[]> {
  const finished = await tx
    .select({
      status: runStatsDaily.status,
      count: sql<number>`sum(${runStatsDaily.runs})::float8`,
    })
    .from(runStatsDaily)
    .groupBy(runStatsDaily.status);
  const active = await tx
    .select({ status: runs.status, count: sql<number>`count(*)::float8` })
    .from(runs)
    .where(inArray(runs.status, [...ACTIVE_STATUSES]))
    .groupBy(runs.status);
  return [...finished, ...active].filter((r) => r.count > 0);
}

async function tokenTotal(tx: Tx): Promise<number> {
  const [row] = await tx
    .select({ tokens: sql<number>`coalesce(sum((${runs.metrics} ->> 'tokens')::float8), 0)` })
    .from(runs);
  return Number(row?.tokens ?? 0);
}
