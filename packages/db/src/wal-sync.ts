import { close, closeSync, fsync, open } from "node:fs";
import { dirname, resolve } from "node:path";
import type { Database } from "./connection";

/**
 * Group commits whose fsync runs off the event loop. `commit` runs a write transaction with
 * `synchronous=NORMAL`: when it returns, the writes are in the WAL file (the OS's page cache),
 * visible to every connection and safe from the process's crash, but not yet from a power
 * loss. `sync` then fsyncs the WAL file in libuv's thread pool — what `synchronous=FULL` does
 * inside COMMIT, blocking the event loop — so that the caller can overlap it with other work
 * (the API sends the run's job to Redis meanwhile) and acknowledge only once it resolved.
 *
 * The connection's other writes keep its own setting (`FULL` for the API): only `commit`'s
 * transactions are switched, and switched back after.
 */
export interface DeferredSyncCommits {
  /** Runs `fn` in one `BEGIN IMMEDIATE` … `COMMIT` without waiting for the disk; throws as a transaction does. */
  commit(fn: () => void): void;
  /** Whether a transaction is open on the connection (SQLite rolls back by itself on some errors). */
  inTransaction(): boolean;
  /**
   * Resolves once every transaction committed before the call is on disk: the WAL file fsynced
   * by a sync that began after the call. Callers that ask while one runs share the next one.
   */
  sync(): Promise<void>;
  /** Lets go of the WAL file (the database is closing). */
  close(): void;
}

export function deferredSyncCommits(database: Database): DeferredSyncCommits {
  const { sqlite } = database;
  if (sqlite.memory) throw new Error("an in-memory database has no file to sync");
  // The same path SQLite opened (better-sqlite3 keeps the name it was given).
  const wal = `${resolve(sqlite.name)}-wal`;
  const before = String(sqlite.pragma("synchronous", { simple: true }));
  // Not prepared statements: SQLite applies this pragma when it compiles it, not when it runs.
  const normal = "PRAGMA synchronous = NORMAL";
  const restore = `PRAGMA synchronous = ${before}`;
  // The WAL file stays while this connection is open (only the last connection to close
  // removes it; a checkpoint rewrites it in place), so one descriptor serves every sync: one
  // job in the thread pool each, not three (open, fsync, close).
  let fd: number | null = null;
  const sync = coalesced(async () => {
    if (fd === null) {
      const opened = await call<number>((done) => open(wal, "r", done));
      try {
        // What SQLite does on a new WAL file's first sync under FULL: its directory entry too.
        await fsyncPath(dirname(wal));
      } catch (error) {
        close(opened, () => {});
        throw error;
      }
      if (fd === null) fd = opened;
      else close(opened, () => {});
    }
    const current = fd;
    await call<void>((done) => fsync(current, done));
  });
  return {
    commit(fn) {
      sqlite.exec(normal);
      try {
        sqlite.transaction(fn).immediate();
      } finally {
        sqlite.exec(restore);
      }
    },
    inTransaction: () => sqlite.inTransaction,
    sync,
    close() {
      if (fd !== null) closeSync(fd);
      fd = null;
    },
  };
}

function call<T>(start: (done: (error: NodeJS.ErrnoException | null, value: T) => void) => void) {
  return new Promise<T>((resolve, reject) => {
    start((error, value) => (error ? reject(error) : resolve(value)));
  });
}

async function fsyncPath(path: string): Promise<void> {
  const fd = await call<number>((done) => open(path, "r", done));
  try {
    await call<void>((done) => fsync(fd, done));
  } finally {
    close(fd, () => {});
  }
}

/**
 * One run of `task` for the callers that wait together: a call while none runs starts one; a
 * call while one runs waits for the next, which starts when the running one ends (its work may
 * have begun before the caller's writes) and is shared by every caller that came meanwhile.
 * Each call settles with the outcome of a run that began after it.
 */
export function coalesced(task: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | null = null;
  let next: Promise<void> | null = null;
  const start = (): Promise<void> => {
    const run = task().finally(() => {
      if (running === run) running = null;
    });
    running = run;
    return run;
  };
  return () => {
    if (running === null) return start();
    if (next === null) {
      next = running
        .catch(() => {})
        .then(() => {
          next = null;
          return start();
        });
    }
    return next;
  };
}
