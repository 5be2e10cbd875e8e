import { type BudgetSnapshot, EMPTY_METRICS } from "@looprun/core";
import type { Db } from "./connection";
import { appendEvents } from "./event-log";
import { preparedOnce, sqliteClient } from "./prepared";
import { queuedRunRow, type RunRow } from "./records";

/**
 * The writes of a submit (`RunRepository.createRun`) as better-sqlite3 statements prepared once
 * per connection (see prepared.ts), written in SQL rather than built with drizzle: building each
 * query and compiling it in SQLite took most of a submit's CPU time in the API; drizzle's
 * prepared queries then still mapped every parameter and every column of the returned row. The
 * queued run's row is the values written and the columns' defaults (`queuedRunRow`), so
 * nothing is read back. Run inside its transaction.
 */
function prepare(db: Db) {
  const client = sqliteClient(db);
  return {
    sessionWorkspace: client
      .prepare<[id: string], string>("select workspace from sessions where id = ?")
      .pluck(),
    insertSession: client.prepare<[id: string, workspace: string, createdAt: number]>(
      "insert into sessions (id, workspace, created_at) values (?, ?, ?) on conflict do nothing",
    ),
    insertRun: client.prepare<
      [
        id: string,
        sessionId: string,
        task: string,
        spec: string,
        workspace: string,
        metrics: string,
        createdAt: number,
      ]
    >(
      `insert into runs (id, session_id, task, spec, workspace, status, metrics, progress, created_at)
         values (?, ?, ?, ?, ?, 'queued', ?, 'queued', ?)`,
    ),
  };
}

const statements = (db: Db) => preparedOnce(db, prepare);

/** The workspace of a session, or null when there is no such session. */
export function sessionWorkspace(db: Db, sessionId: string): string | null {
  return statements(db).sessionWorkspace.get(sessionId) ?? null;
}

/** Creates the session unless it exists. */
export function ensureSession(db: Db, id: string, workspace: string, createdAt: number): void {
  statements(db).insertSession.run(id, workspace, createdAt);
}

const EMPTY_METRICS_JSON = JSON.stringify(EMPTY_METRICS);

/** Inserts a queued run and returns its row. */
export function insertQueuedRun(db: Db, input: Parameters<typeof queuedRunRow>[0]): RunRow {
  const row = queuedRunRow(input);
  statements(db).insertRun.run(
    row.id,
    row.sessionId,
    row.task,
    JSON.stringify(row.spec),
    row.workspace,
    EMPTY_METRICS_JSON,
    row.createdAt,
  );
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
