import {
  type FailurePattern,
  foldPattern,
  MAX_PATTERNS_PER_WORKSPACE,
  mergeCandidates,
  observationsOf,
  patternDeltas,
  type RunMutation,
} from "@looprun/core";
import { and, desc, eq, sql } from "drizzle-orm";
import {
  candidateClauses,
  type PatternFilter,
  patternConditions,
  toFailurePattern,
} from "../failure-patterns";
import type { PgDb } from "./connection";
import { failurePatterns } from "./schema";

type Tx = Pick<PgDb, "select" | "insert" | "delete">;

/**
 * PostgreSQL twin of `recordPatterns` (../failure-patterns.ts). The counters are added in the
 * upsert itself, so runs of one workspace committing at once never lose a count; the last
 * errors are merged from the row as read in this transaction (two runs failing the same way
 * at the same instant may keep one error text instead of both). The rows are upserted in key
 * order (`patternDeltas` sorts them): two commits touching the same rows lock them in the same
 * order, so one waits for the other instead of both deadlocking (40P01, one run failing).
 */
export async function recordPatterns(
  tx: Tx,
  workspace: string,
  runId: string,
  m: RunMutation,
  now: number,
): Promise<void> {
  let added = false;
  for (const delta of patternDeltas(observationsOf(m))) {
    const [existing] = await tx
      .select()
      .from(failurePatterns)
      .where(
        and(
          eq(failurePatterns.scope, delta.scope),
          eq(failurePatterns.workspace, workspace),
          eq(failurePatterns.subject, delta.subject),
          eq(failurePatterns.shape, delta.shape),
        ),
      );
    if (!existing) added = true;
    const next = foldPattern(
      existing ? toFailurePattern(existing) : null,
      workspace,
      delta,
      runId,
      now,
    );
    await tx
      .insert(failurePatterns)
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
      });
  }
  // The cap of ../failure-patterns.ts. Rows another commit holds are skipped, not waited for:
  // taking many row locks in scan order could deadlock with that commit's upserts.
  if (added) {
    await tx
      .delete(failurePatterns)
      .where(
        sql`ctid in (select ctid from ${failurePatterns} where ${failurePatterns.workspace} = ${workspace} order by ${failurePatterns.lastSeenAt} desc offset ${MAX_PATTERNS_PER_WORKSPACE} for update skip locked)`,
      );
  }
}

/** Twin of `workspacePatterns` (../failure-patterns.ts): the two selections of `promptCandidates`. */
export async function workspacePatterns(
  db: PgDb,
  workspace: string,
  limit: number,
): Promise<FailurePattern[]> {
  const ratio = sql`${failurePatterns.failures}::float8 / (${failurePatterns.failures} + ${failurePatterns.successes})`;
  const clauses = candidateClauses(failurePatterns, workspace, ratio);
  const select = ([where, order]: typeof clauses.failing) =>
    db
      .select()
      .from(failurePatterns)
      .where(where)
      .orderBy(...order)
      .limit(limit);
  const [failing, succeeding] = await Promise.all([
    select(clauses.failing),
    select(clauses.succeeding),
  ]);
  return mergeCandidates(failing.map(toFailurePattern), succeeding.map(toFailurePattern));
}

/** Twin of `listPatterns` (../failure-patterns.ts). */
export async function listPatterns(db: PgDb, filter: PatternFilter): Promise<FailurePattern[]> {
  const rows = await db
    .select()
    .from(failurePatterns)
    .where(patternConditions(failurePatterns, filter))
    // Ties in byte order of the key, as SQLite orders them (../failure-patterns.ts).
    .orderBy(
      desc(failurePatterns.failures),
      desc(failurePatterns.lastSeenAt),
      sql`${failurePatterns.scope} collate "C"`,
      sql`${failurePatterns.workspace} collate "C"`,
      sql`${failurePatterns.subject} collate "C"`,
      sql`${failurePatterns.shape} collate "C"`,
    )
    .limit(filter.limit);
  return rows.map(toFailurePattern);
}
