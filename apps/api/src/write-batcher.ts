import { type Database, deferredSyncCommits } from "@looprun/db";

export interface WriteBatcherOptions {
  /**
   * Runs `fn` in one write transaction (`BEGIN IMMEDIATE` … `COMMIT`), synchronously; throws
   * when the transaction cannot commit. Each write's own transaction nests inside it as a
   * savepoint (better-sqlite3 and drizzle both do that).
   */
  transaction: (fn: () => void) => void;
  /**
   * Whether that transaction is still open. SQLite rolls a transaction back by itself on some
   * errors (disk full, I/O); the writes after that must not run outside it, each committing
   * on its own.
   */
  inTransaction: () => boolean;
  /**
   * When `transaction` commits without waiting for the disk (see `deferredSyncCommits` in
   * @looprun/db): resolves once what was committed before the call is on disk. Each write's
   * `durable` is its transaction's. Unset: a commit is durable when it returns.
   */
  sync?: () => Promise<void>;
  /** Lets go of what `sync` holds (the database is closing). */
  close?: () => void;
  /** @defaultValue 64 — writes per transaction; more wait for the next one */
  maxBatch?: number;
}

/** A write of a group commit that committed: visible to every connection now, on disk once `durable` resolves. */
export interface Committed<T> {
  value: T;
  /** Rejects when the disk did not take it (the fsync failed): the write may not survive a power loss. */
  durable: Promise<void>;
}

const ON_DISK: Promise<void> = Promise.resolve();

interface Pending {
  work: () => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit for synchronous SQLite writes: the writes handed over in the same turn of the
 * event loop run in one transaction, so that they share one fsync (synchronous=FULL) instead
 * of paying one each. A write's promise settles only after the transaction that holds it has
 * committed, with its `durable` promise settling once that commit is on disk (at once, unless
 * `sync` is given: then the fsync runs off the event loop while the caller goes on); a write
 * that throws is rolled back alone (its savepoint) and rejects with its error; when the
 * transaction itself cannot commit, every write of it rejects and none is stored.
 */
export class WriteBatcher {
  private pending: Pending[] = [];
  private scheduled = false;
  /** The last transaction's sync while it runs. */
  private syncing: Promise<void> | null = null;
  private readonly maxBatch: number;

  constructor(private readonly opts: WriteBatcherOptions) {
    this.maxBatch = opts.maxBatch ?? 64;
  }

  /** Runs `work` (a synchronous write, e.g. a repository method) in the next group commit. */
  run<T>(work: () => T): Promise<Committed<T>> {
    return new Promise<Committed<T>>((resolve, reject) => {
      this.pending.push({ work, resolve: resolve as (value: unknown) => void, reject });
      this.schedule();
    });
  }

  /**
   * The next transaction runs in the next turn of the event loop — or, while the last one's
   * sync is under way, once it is done: so syncs never overlap, and the writes that come
   * meanwhile share one transaction and one sync (under load, batches as large as a blocking
   * fsync made them).
   */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    const flushSoon = () => setImmediate(() => this.flush());
    if (this.syncing) this.syncing.then(flushSoon, flushSoon);
    else flushSoon();
  }

  /** For shutdown, after the last write: lets go of what the sync holds. */
  close(): void {
    this.opts.close?.();
  }

  private flush(): void {
    const batch = this.pending.splice(0, this.maxBatch);
    this.scheduled = false;
    const outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
    try {
      this.opts.transaction(() => {
        for (const item of batch) {
          if (!this.opts.inTransaction()) throw new Error("the write transaction was rolled back");
          try {
            outcomes.push({ ok: true, value: item.work() });
          } catch (error) {
            outcomes.push({ ok: false, error });
          }
        }
        if (!this.opts.inTransaction()) throw new Error("the write transaction was rolled back");
      });
    } catch (error) {
      for (const item of batch) item.reject(error);
      if (this.pending.length > 0) this.schedule();
      return;
    }
    let durable = ON_DISK;
    if (this.opts.sync) {
      durable = this.opts.sync();
      this.syncing = durable;
      // Handles a rejection too: a batch whose writes all failed has no one awaiting it.
      const done = () => {
        if (this.syncing === durable) this.syncing = null;
      };
      durable.then(done, done);
    }
    if (this.pending.length > 0) this.schedule();
    batch.forEach((item, i) => {
      const outcome = outcomes[i];
      if (outcome?.ok) item.resolve({ value: outcome.value, durable });
      else item.reject(outcome?.error);
    });
  }
}

/**
 * The API's group commit of submits on SQLite: each batch committed without waiting for the
 * disk and its WAL fsynced in the thread pool (`deferredSyncCommits`), which a submit overlaps
 * with its `Queue.add`. An in-memory database (tests) has nothing to sync.
 */
export function submitBatcher(database: Database): WriteBatcher {
  const { sqlite } = database;
  if (sqlite.memory) {
    return new WriteBatcher({
      transaction: (fn) => sqlite.transaction(fn).immediate(),
      inTransaction: () => sqlite.inTransaction,
    });
  }
  const commits = deferredSyncCommits(database);
  return new WriteBatcher({
    transaction: commits.commit,
    inTransaction: commits.inTransaction,
    sync: commits.sync,
    close: commits.close,
  });
}
