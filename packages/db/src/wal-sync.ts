import {
  close as closeCallback,
  closeSync,
  fsync as fsyncCallback,
  open as openCallback,
} from "node:fs";
import { dirname, resolve } from "node:path";
import { promisify } from "node:util";
import type { Database } from "./connection";

// The callback API promisified: fs/promises' FileHandle costs more per call on the event loop.
const open = promisify(openCallback);
const fsync = promisify(fsyncCallback);
const close = promisify(closeCallback);

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
   * by an fsync that began after the call.
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
  // job in the thread pool each, not three (open, fsync, close). Syncs may overlap: each
  // fsync began after its caller's commit.
  let fd: number | null = null;
  let opening: Promise<number> | null = null;
  const walFd = async (): Promise<number> => {
    const handle = await open(wal, "r");
    try {
      // What SQLite does on a new WAL file's first sync under FULL: its directory entry too.
      await fsyncPath(dirname(wal));
    } catch (error) {
      await close(handle);
      throw error;
    }
    fd = handle;
    return handle;
  };
  const sync = async () => {
    if (fd === null) {
      // Opened once; the syncs that come while it opens wait for that one.
      opening ??= walFd().finally(() => {
        opening = null;
      });
      await fsync(await opening);
    } else {
      await fsync(fd);
    }
  };
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

async function fsyncPath(path: string): Promise<void> {
  const handle = await open(path, "r");
  try {
    await fsync(handle);
  } finally {
    await close(handle);
  }
}
