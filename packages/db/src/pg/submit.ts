import {
  ACTIVE_STATUSES,
  budgetSnapshot,
  RunAlreadyActiveError,
  type RunRecord,
} from "@looprun/core";
import { and, eq, inArray, lt, type SQL, sql } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { IDEMPOTENCY_TTL_MS } from "../idempotency";
import { queuedRunRow, toRunRecord } from "../records";
import {
  IdempotencyConflictError,
  type NewRun,
  SessionWorkspaceMismatchError,
} from "../run-repository";
import { type PgDb, poolOf } from "./connection";
import { withoutNul } from "./nul-bytes";
import { isPgUniqueViolation } from "./pg-errors";
import { idempotencyKeys, runs } from "./schema";

type Writer = Pick<PgDb, "execute">;

/**
 * The session (unless it exists), the run and its `run_queued` event, in one statement: one
 * round trip, atomic by itself. The session's row and the run's are checked by the foreign
 * keys at the end of the statement, when both are there. A guessed workspace (see `NewRun`)
 * stores the run only if the session is new or has that workspace: the statement then
 * changes no row. Its text is the same for every run.
 */
function insertQueuedStatement(input: NewRun): { run: RunRecord; statement: SQL } {
  const run = toRunRecord(queuedRunRow(input));
  const queued = { sessionId: run.sessionId, budget: budgetSnapshot(run, input.createdAt) };
  const statement = sql`
    with s as (
      insert into sessions (id, workspace, created_at)
      values (${input.sessionId}, ${input.sessionWorkspace}, ${input.createdAt})
      on conflict (id) do nothing
    ), r as (
      insert into runs (id, session_id, task, spec, workspace, status, metrics, progress, created_at)
      select ${run.id}::text, ${run.sessionId}::text, ${run.spec.task}::text,
        ${JSON.stringify(run.spec)}::json, ${run.workspace}::text, 'queued',
        ${JSON.stringify(run.metrics)}::json, 'queued', ${input.createdAt}::int8
      where not ${input.workspaceGuessed === true}::bool
        or coalesce((select workspace from sessions where id = ${run.sessionId}::text),
          ${run.workspace}::text) = ${run.workspace}::text
      returning id
    )
    insert into events (run_id, seq, type, at, data)
    select r.id, 1, 'run_queued', ${input.createdAt}::int8, ${JSON.stringify(queued)}::json from r`;
  return { run, statement };
}

/** The run stored by the statement above, or the guess refused (it changed no row). */
function stored(run: RunRecord, input: NewRun, rowCount: number | null): RunRecord {
  if (rowCount === 0 && input.workspaceGuessed) {
    throw new SessionWorkspaceMismatchError(input.sessionId);
  }
  return run;
}

const dialect = new PgDialect();

/**
 * The insert as a named statement on a pooled connection: PostgreSQL parses and plans it once
 * per connection rather than for every submit (on the bench's two cores its backends share
 * the CPU with the API).
 */
async function insertQueued(db: PgDb, input: NewRun): Promise<RunRecord> {
  const { run, statement } = insertQueuedStatement(input);
  const { sql: text, params } = dialect.sqlToQuery(statement);
  const result = await poolOf(db).query({ name: "looprun_insert_queued", text, values: params });
  return stored(run, input, result.rowCount);
}

/** The same insert inside a transaction (a submit with an idempotency key). */
async function insertQueuedIn(tx: Writer, input: NewRun): Promise<RunRecord> {
  const { run, statement } = insertQueuedStatement(input);
  return stored(run, input, (await tx.execute(statement)).rowCount);
}

async function activeRunOf(db: PgDb, sessionId: string): Promise<string | null> {
  const [row] = await db
    .select({ id: runs.id })
    .from(runs)
    .where(and(eq(runs.sessionId, sessionId), inArray(runs.status, [...ACTIVE_STATUSES])));
  return row?.id ?? null;
}

/**
 * `RunRepository.createRun` on PostgreSQL. The partial unique index decides between
 * concurrent submits to one session, also across API processes: the losers get
 * `RunAlreadyActiveError`. With an idempotency key, submits of one key are serialised by an
 * advisory lock and a repeated one replays the first run (`replayed`).
 */
export async function createRun(
  db: PgDb,
  newRun: NewRun,
): Promise<RunRecord & { replayed?: boolean }> {
  const input = withoutNul(newRun);
  try {
    const idempotency = input.idempotency;
    if (!idempotency) return await insertQueued(db, input);
    return await db.transaction(async (tx) => {
      await tx.execute(
        sql`select pg_advisory_xact_lock(hashtext(${`idempotency:${idempotency.key}`}))`,
      );
      await tx
        .delete(idempotencyKeys)
        .where(lt(idempotencyKeys.createdAt, input.createdAt - IDEMPOTENCY_TTL_MS));
      const [seen] = await tx
        .select()
        .from(idempotencyKeys)
        .where(eq(idempotencyKeys.key, idempotency.key));
      if (seen) {
        if (seen.requestHash !== idempotency.requestHash)
          throw new IdempotencyConflictError(seen.key);
        const [first] = await tx.select().from(runs).where(eq(runs.id, seen.runId));
        if (first) return { ...toRunRecord(first), replayed: true };
      }
      const run = await insertQueuedIn(tx, input);
      await tx
        .insert(idempotencyKeys)
        .values({
          key: idempotency.key,
          requestHash: idempotency.requestHash,
          runId: run.id,
          createdAt: input.createdAt,
        })
        .onConflictDoUpdate({
          target: idempotencyKeys.key,
          set: { runId: run.id, requestHash: idempotency.requestHash, createdAt: input.createdAt },
        });
      return run;
    });
  } catch (error) {
    if (!isPgUniqueViolation(error, "runs_one_active_per_session")) throw error;
    const active = await activeRunOf(db, input.sessionId);
    if (!active) throw error;
    throw new RunAlreadyActiveError(input.sessionId, active);
  }
}
