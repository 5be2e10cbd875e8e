import {
  type FailurePattern,
  foldPattern,
  MAX_PATTERNS_PER_WORKSPACE,
  mergeCandidates,
  observationsOf,
  patternDeltas,
  type RunMutation,
} from "@looprun/core";
import {
  type AnyColumn,
  and,
  desc,
  eq,
  gt,
  gte,
  type SQL,
  type SQLWrapper,
  sql,
} from "drizzle-orm";
import type { Db } from "./connection";
import { preparedOnce } from "./prepared";
import { failurePatterns } from "./schema";

type Row = typeof failurePatterns.$inferSelect;

export function toFailurePattern(row: Row): FailurePattern {
  return {
    scope: row.scope === "command" ? "command" : "tool",
    workspace: row.workspace,
    subject: row.subject,
    shape: row.shape,
    successes: row.successes,
    failures: row.failures,
    totalDurationMs: row.totalDurationMs,
    lastErrors: row.lastErrors,
    lastRunId: row.lastRunId,
    lastSeenAt: row.lastSeenAt,
  };
}

/**
 * Folds what a commit teaches (its tool calls, the validation results of the iteration it
 * decides) into the workspace's failure patterns, inside the commit's transaction: exactly
 * once per commit, fenced with it.
 */
export function recordPatterns(
  db: Db,
  workspace: string,
  runId: string,
  m: RunMutation,
  now: number,
): void {
  const deltas = patternDeltas(observationsOf(m));
  if (deltas.length === 0) return;
  const st = preparedOnce(db, patternStatements);
  let added = false;
  for (const delta of deltas) {
    const key = { scope: delta.scope, workspace, subject: delta.subject, shape: delta.shape };
    const existing = st.get.get(key);
    if (!existing) added = true;
    const next = foldPattern(
      existing ? toFailurePattern(existing) : null,
      workspace,
      delta,
      runId,
      now,
    );
    st.upsert.run({
      ...next,
      dSuccesses: delta.successes,
      dFailures: delta.failures,
      dDurationMs: delta.totalDurationMs,
    });
  }
  // A row per distinct command line would grow without bound: past the cap, the workspace's
  // least recently seen patterns go (only a commit that added a row can pass it).
  if (added) st.evict.run({ workspace, keep: MAX_PATTERNS_PER_WORKSPACE });
}

/** The columns of the patterns table that its queries read: SQLite's table or PostgreSQL's. */
export interface PatternColumns {
  workspace: AnyColumn;
  scope: AnyColumn;
  failures: AnyColumn;
  successes: AnyColumn;
  lastSeenAt: AnyColumn;
}

/**
 * The two selections of `promptCandidates` (@looprun/core), on either store: what may have
 * failed before, highest failure ratio first (`ratio`, written in the store's SQL), and apart
 * from it what succeeded most.
 */
export function candidateClauses(
  t: PatternColumns,
  workspace: string | SQLWrapper,
  ratio: SQL,
): { failing: [SQL | undefined, SQL[]]; succeeding: [SQL | undefined, SQL[]] } {
  return {
    failing: [
      and(eq(t.workspace, workspace), gt(t.failures, 0), gte(t.failures, t.successes)),
      [desc(ratio), desc(t.failures), desc(t.lastSeenAt)],
    ],
    succeeding: [
      and(eq(t.workspace, workspace), gt(t.successes, 0)),
      [desc(t.successes), desc(t.lastSeenAt)],
    ],
  };
}

const failureRatio = sql`${failurePatterns.failures} * 1.0 / (${failurePatterns.failures} + ${failurePatterns.successes})`;

/**
 * The statements of `recordPatterns` and `workspacePatterns` (read before every iteration),
 * prepared once per connection (see prepared.ts).
 */
function patternStatements(db: Db) {
  const p = sql.placeholder;
  const { failing, succeeding } = candidateClauses(failurePatterns, p("workspace"), failureRatio);
  return {
    failing: db
      .select()
      .from(failurePatterns)
      .where(failing[0])
      .orderBy(...failing[1])
      .limit(p("limit"))
      .prepare(),
    succeeding: db
      .select()
      .from(failurePatterns)
      .where(succeeding[0])
      .orderBy(...succeeding[1])
      .limit(p("limit"))
      .prepare(),
    evict: db
      .delete(failurePatterns)
      .where(
        sql`rowid in (select rowid from ${failurePatterns} where ${failurePatterns.workspace} = ${p("workspace")} order by ${failurePatterns.lastSeenAt} desc, rowid desc limit -1 offset ${p("keep")})`,
      )
      .prepare(),
    get: db
      .select()
      .from(failurePatterns)
      .where(
        and(
          eq(failurePatterns.scope, p("scope")),
          eq(failurePatterns.workspace, p("workspace")),
          eq(failurePatterns.subject, p("subject")),
          eq(failurePatterns.shape, p("shape")),
        ),
      )
      .prepare(),
    upsert: db
      .insert(failurePatterns)
      .values({
        scope: p("scope"),
        workspace: p("workspace"),
        subject: p("subject"),
        shape: p("shape"),
        successes: p("successes"),
        failures: p("failures"),
        totalDurationMs: p("totalDurationMs"),
        lastErrors: p("lastErrors"),
        lastRunId: p("lastRunId"),
        lastSeenAt: p("lastSeenAt"),
      } as never)
      .onConflictDoUpdate({
        target: [
          failurePatterns.scope,
          failurePatterns.workspace,
          failurePatterns.subject,
          failurePatterns.shape,
        ],
        set: {
          successes: sql`${failurePatterns.successes} + ${p("dSuccesses")}`,
          failures: sql`${failurePatterns.failures} + ${p("dFailures")}`,
          totalDurationMs: sql`${failurePatterns.totalDurationMs} + ${p("dDurationMs")}`,
          lastErrors: p("lastErrors"),
          lastRunId: p("lastRunId"),
          lastSeenAt: p("lastSeenAt"),
        } as never,
      })
      .prepare(),
  };
}

/** Which patterns `GET /api/stats/tools` lists. */
export interface PatternFilter {
  workspace?: string;
  scope?: FailurePattern["scope"];
  limit: number;
}

/** The list's filter, on either store's table. */
export function patternConditions(t: PatternColumns, filter: PatternFilter) {
  return and(
    filter.workspace !== undefined ? eq(t.workspace, filter.workspace) : undefined,
    filter.scope !== undefined ? eq(t.scope, filter.scope) : undefined,
  );
}

/** Patterns across workspaces (or of one), most failures first, then the most recent. */
export function listPatterns(db: Db, filter: PatternFilter): FailurePattern[] {
  return (
    db
      .select()
      .from(failurePatterns)
      .where(patternConditions(failurePatterns, filter))
      // Ties (patterns of one commit share their time) in key order: the same on every engine.
      .orderBy(
        desc(failurePatterns.failures),
        desc(failurePatterns.lastSeenAt),
        failurePatterns.scope,
        failurePatterns.workspace,
        failurePatterns.subject,
        failurePatterns.shape,
      )
      .limit(filter.limit)
      .all()
      .map(toFailurePattern)
  );
}

/** The patterns a prompt is chosen from (`promptCandidates`), most failures first. */
export function workspacePatterns(db: Db, workspace: string, limit: number): FailurePattern[] {
  const st = preparedOnce(db, patternStatements);
  return mergeCandidates(
    st.failing.all({ workspace, limit }).map(toFailurePattern),
    st.succeeding.all({ workspace, limit }).map(toFailurePattern),
  );
}
