import { type BudgetSnapshot, EMPTY_METRICS, type RunSpec } from "@looprun/core";
import type BetterSqlite3 from "better-sqlite3";
import { eq, sql } from "drizzle-orm";
import type { Db } from "./connection";
import { runs, sessions } from "./schema";

/**
 * The writes of a submit (`RunRepository.createRun`) as statements prepared once per
 * connection: building each query with drizzle and compiling it in SQLite took most of a
 * submit's CPU time in the API (profiled at 20 submits in flight). Run inside its transaction.
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
    // The next gap-free seq of the run, as event-log.ts's appendEvents gives it.
    appendEvent: client(db).prepare<[{ runId: string; type: string; at: number; data: string }]>(
      `insert into events (run_id, seq, type, at, data)
       values (:runId, (select coalesce(max(seq), 0) + 1 from events where run_id = :runId),
         :type, :at, :data)`,
    ),
  };
}

// drizzle(client) keeps the better-sqlite3 handle as `$client`; its type leaves it out.
const client = (db: Db) => (db as unknown as { $client: BetterSqlite3.Database }).$client;

type Statements = ReturnType<typeof prepare>;
const cache = new WeakMap<Db, Statements>();

function statements(db: Db): Statements {
  let s = cache.get(db);
  if (!s) {
    s = prepare(db);
    cache.set(db, s);
  }
  return s;
}

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
  statements(db).appendEvent.run({ runId, type: "run_queued", at, data: JSON.stringify(data) });
}
