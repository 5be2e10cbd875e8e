import { type BudgetSnapshot, EMPTY_METRICS, type RunSpec } from "@looprun/core";
import { eq, sql } from "drizzle-orm";
import type { Db } from "./connection";
import { appendEvents } from "./event-log";
import { preparedOnce } from "./prepared";
import { runs, sessions } from "./schema";

/**
 * The writes of a submit (`RunRepository.createRun`) as statements prepared once per
 * connection (see prepared.ts): building each query with drizzle and compiling it in SQLite
 * took most of a submit's CPU time in the API (profiled at 20 submits in flight). Run inside
 * its transaction.
 */
function prepare(db: Db) {
  const p = (name: string) => sql.placeholder(name);
  return {
    sessionWorkspace: db
      .select({ workspace: sessions.workspace })
      .from(sessions)
      .where(eq(sessions.id, p("id")))
      .prepare(),
    insertSession: db
      .insert(sessions)
      .values({ id: p("id"), workspace: p("workspace"), createdAt: p("createdAt") } as never)
      .onConflictDoNothing()
      .prepare(),
    insertRun: db
      .insert(runs)
      .values({
        id: p("id"),
        sessionId: p("sessionId"),
        task: p("task"),
        spec: p("spec"),
        workspace: p("workspace"),
        status: "queued",
        metrics: p("metrics"),
        progress: "queued",
        createdAt: p("createdAt"),
      } as never)
      .returning()
      .prepare(),
  };
}

const statements = (db: Db) => preparedOnce(db, prepare);

/** The workspace of a session, or null when there is no such session. */
export function sessionWorkspace(db: Db, sessionId: string): string | null {
  return statements(db).sessionWorkspace.get({ id: sessionId })?.workspace ?? null;
}

/** Creates the session unless it exists. */
export function ensureSession(db: Db, id: string, workspace: string, createdAt: number): void {
  statements(db).insertSession.run({ id, workspace, createdAt });
}

/** Inserts a queued run and returns its row. */
export function insertQueuedRun(
  db: Db,
  input: { id: string; sessionId: string; spec: RunSpec; workspace: string; createdAt: number },
): typeof runs.$inferSelect {
  const row = statements(db).insertRun.get({
    id: input.id,
    sessionId: input.sessionId,
    task: input.spec.task,
    spec: input.spec,
    workspace: input.workspace,
    metrics: EMPTY_METRICS,
    createdAt: input.createdAt,
  });
  if (!row) throw new Error(`run ${input.id} was not inserted`);
  return row;
}

/** Appends the run_queued event of a run just inserted. */
export function appendRunQueued(
  db: Db,
  runId: string,
  data: { sessionId: string; budget: BudgetSnapshot },
  at: number,
): void {
  appendEvents(db, runId, [{ type: "run_queued", data }], at);
}
