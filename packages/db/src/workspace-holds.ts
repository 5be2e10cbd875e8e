import { ACTIVE_STATUSES } from "@looprun/core";
import {
  type AnyColumn,
  and,
  eq,
  gt,
  inArray,
  ne,
  or,
  type SQL,
  type SQLWrapper,
  sql,
} from "drizzle-orm";
import type { Db } from "./connection";
import { preparedOnce } from "./prepared";
import { runs, workspaceHolds } from "./schema";

/** What a rollback asks for before it restores a workspace. */
export interface HoldRequest {
  workspace: string;
  /** The session of the run whose snapshot is restored. */
  sessionId: string;
  runId: string;
  now: number;
  /** How long the hold lasts if it is never released (the API died mid-restore). */
  ttlMs: number;
  /**
   * An active run that does not bar the hold: the run restoring its own workspace as it ends
   * (rollbackOnFailure) — the API's rollbacks name none.
   */
  exceptRunId?: string;
}

/**
 * `held`: the workspace is the caller's until it releases it (or the hold expires). Refused
 * while a run is active in the session or in the workspace (another session may share it),
 * naming that run, or while another rollback holds the workspace or the session.
 */
export type HoldResult =
  | { held: true }
  | { held: false; activeRunId: string; heldByRun?: undefined }
  | { held: false; activeRunId?: undefined; heldByRun: string }
  /** The run is gone (deleted by retention since it was read): nothing to restore. */
  | { held: false; activeRunId?: undefined; heldByRun?: undefined; runGone: true };

/**
 * Whether the workspace in `column` is `path`, lies inside it, or holds it: a restore of one
 * rewrites the other's files. Workspaces are absolute paths; `under` is `path` + "/" (given
 * when `path` is a placeholder of a prepared statement). The same SQL on SQLite and PostgreSQL.
 */
export function workspacesOverlap(
  column: AnyColumn,
  path: string | SQLWrapper,
  under?: string | SQLWrapper,
): SQL {
  const below = under ?? (typeof path === "string" ? `${path}/` : undefined);
  if (below === undefined) throw new Error("workspacesOverlap: a placeholder path needs `under`");
  return sql`(${column} = ${path}
    or substr(${column}, 1, length(cast(${below} as text))) = ${below}
    or substr(cast(${path} as text), 1, length(${column}) + 1) = ${column} || '/')`;
}

/** The key a rollback holds its session's snapshot store by (see holdKeys). */
const sessionKey = (sessionId: string) => `session:${sessionId}`;

/** What a run that is about to start is checked by: its workspace and its session. */
export type HeldRun = Pick<HoldRequest, "workspace" | "sessionId">;

/**
 * Live holds that bar a rollback, or a run from starting: of the session (its snapshot
 * store), or of an overlapping workspace.
 */
export function holdsBarring(
  req: Pick<HoldRequest, "workspace" | "sessionId">,
  now: number,
): SQL | undefined {
  return barring(req.workspace, undefined, sessionKey(req.sessionId), now);
}

/** holdsBarring's condition, of values or of placeholders (a placeholder path needs `under`). */
function barring(
  workspace: string | SQLWrapper,
  under: string | SQLWrapper | undefined,
  session: string | SQLWrapper,
  now: number | SQLWrapper,
): SQL | undefined {
  return and(
    or(
      workspacesOverlap(workspaceHolds.workspace, workspace, under),
      eq(workspaceHolds.workspace, session),
    ),
    gt(workspaceHolds.expiresAt, now),
  );
}

/** Active runs that bar a rollback: of the session, or in an overlapping workspace. */
export function runsBarring(
  req: Pick<HoldRequest, "workspace" | "sessionId" | "exceptRunId">,
): SQL | undefined {
  return and(
    inArray(runs.status, [...ACTIVE_STATUSES]),
    or(eq(runs.sessionId, req.sessionId), workspacesOverlap(runs.workspace, req.workspace)),
    req.exceptRunId === undefined ? undefined : ne(runs.id, req.exceptRunId),
  );
}

/**
 * What a rollback holds: the workspace, and its session's snapshot store (two restores of one
 * session, even of different workspaces, would share its git index). Workspaces are absolute
 * paths, so the session's key never names one.
 */
export function holdKeys(req: Pick<HoldRequest, "workspace" | "sessionId">): string[] {
  return [req.workspace, sessionKey(req.sessionId)];
}

/**
 * Takes the hold of a workspace for a rollback, in one `BEGIN IMMEDIATE` transaction: it
 * serialises with every submit (a run created after it sees the hold: its worker waits).
 * Workspaces that overlap (one inside the other) count as the same.
 */
export function holdWorkspace(db: Db, req: HoldRequest): HoldResult {
  return db.transaction(
    (tx) => {
      // In the transaction retention's delete also takes (its deletes skip held runs).
      if (!tx.select({ id: runs.id }).from(runs).where(eq(runs.id, req.runId)).get()) {
        return { held: false, runGone: true };
      }
      const active = tx.select({ id: runs.id }).from(runs).where(runsBarring(req)).limit(1).get();
      if (active) return { held: false, activeRunId: active.id };
      const keys = holdKeys(req);
      const hold = tx.select().from(workspaceHolds).where(holdsBarring(req, req.now)).get();
      if (hold) return { held: false, heldByRun: hold.runId };
      for (const workspace of keys) {
        const row = { workspace, runId: req.runId, expiresAt: req.now + req.ttlMs };
        tx.insert(workspaceHolds)
          .values(row)
          .onConflictDoUpdate({ target: workspaceHolds.workspace, set: row })
          .run();
      }
      return { held: true };
    },
    { behavior: "immediate" },
  );
}

/** Ends a hold taken by `holdWorkspace` (one that expired and was taken again is left alone). */
export function releaseWorkspace(
  db: Db,
  req: Pick<HoldRequest, "workspace" | "sessionId" | "runId">,
): void {
  db.delete(workspaceHolds)
    .where(
      and(inArray(workspaceHolds.workspace, holdKeys(req)), eq(workspaceHolds.runId, req.runId)),
    )
    .run();
}

const statements = (db: Db) => ({
  heldUntil: db
    .select({ expiresAt: workspaceHolds.expiresAt })
    .from(workspaceHolds)
    .where(
      barring(
        sql.placeholder("workspace"),
        sql.placeholder("under"),
        sql.placeholder("session"),
        sql.placeholder("now"),
      ),
    )
    .prepare(),
});

/**
 * Until when a rollback holds the workspace (or one it lies in, or one inside it) or the
 * run's session (its snapshot store), or null (asked before every run starts).
 */
export function workspaceHeldUntil(db: Db, run: HeldRun, now: number): number | null {
  const { heldUntil } = preparedOnce(db, statements);
  const { workspace } = run;
  const session = sessionKey(run.sessionId);
  return heldUntil.get({ workspace, under: `${workspace}/`, session, now })?.expiresAt ?? null;
}

/** Who holds a workspace for a run's own rollback (as it ends: rollbackOnFailure). */
export function ownRollbackHolder(run: { id: string; workspace: string; sessionId: string }) {
  return { workspace: run.workspace, sessionId: run.sessionId, runId: run.id };
}

/** The hold a run asks for to restore its own workspace: its own activity does not bar it. */
export function ownRollbackHold(
  run: { id: string; workspace: string; sessionId: string },
  now: number,
  ttlMs: number,
): HoldRequest {
  return { ...ownRollbackHolder(run), now, ttlMs, exceptRunId: run.id };
}
