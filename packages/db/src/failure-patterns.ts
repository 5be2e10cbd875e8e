import {
  byFailuresThenRecency,
  type FailurePattern,
  foldPattern,
  observationsOf,
  patternDeltas,
  type RunMutation,
} from "@looprun/core";
import { and, desc, eq, sql } from "drizzle-orm";
import type { Db } from "./connection";
import { failurePatterns } from "./schema";

type Tx = Pick<Db, "select" | "insert">;
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
  tx: Tx,
  workspace: string,
  runId: string,
  m: RunMutation,
  now: number,
): void {
  for (const delta of patternDeltas(observationsOf(m))) {
    const key = and(
      eq(failurePatterns.scope, delta.scope),
      eq(failurePatterns.workspace, workspace),
      eq(failurePatterns.subject, delta.subject),
      eq(failurePatterns.shape, delta.shape),
    );
    const existing = tx.select().from(failurePatterns).where(key).get();
    const next = foldPattern(
      existing ? toFailurePattern(existing) : null,
      workspace,
      delta,
      runId,
      now,
    );
    tx.insert(failurePatterns)
      .values(next)
      .onConflictDoUpdate({
        target: [
          failurePatterns.scope,
          failurePatterns.workspace,
          failurePatterns.subject,
          failurePatterns.shape,
        ],
        set: {
          successes: sql`${failurePatterns.successes} + ${delta.successes}`,
          failures: sql`${failurePatterns.failures} + ${delta.failures}`,
          totalDurationMs: sql`${failurePatterns.totalDurationMs} + ${delta.totalDurationMs}`,
          lastErrors: next.lastErrors,
          lastRunId: runId,
          lastSeenAt: now,
        },
      })
      .run();
  }
}

/** Which patterns `GET /api/stats/tools` lists. */
export interface PatternFilter {
  workspace?: string;
  scope?: FailurePattern["scope"];
  limit: number;
}

export function patternConditions(filter: PatternFilter) {
  return and(
    filter.workspace !== undefined ? eq(failurePatterns.workspace, filter.workspace) : undefined,
    filter.scope !== undefined ? eq(failurePatterns.scope, filter.scope) : undefined,
  );
}

/** Patterns across workspaces (or of one), most failures first, then the most recent. */
export function listPatterns(db: Db, filter: PatternFilter): FailurePattern[] {
  return (
    db
      .select()
      .from(failurePatterns)
      .where(patternConditions(filter))
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

/** A workspace's patterns, most failures first, then the most recent. */
export function workspacePatterns(db: Db, workspace: string, limit: number): FailurePattern[] {
  return db
    .select()
    .from(failurePatterns)
    .where(eq(failurePatterns.workspace, workspace))
    .orderBy(desc(failurePatterns.failures), desc(failurePatterns.lastSeenAt))
    .limit(limit)
    .all()
    .map(toFailurePattern)
    .sort(byFailuresThenRecency);
}
