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
  /** @defaultValue 64 — writes per transaction; more wait for the next one */
  maxBatch?: number;
}

interface Pending {
  work: () => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit for synchronous SQLite writes: the writes handed over in the same turn of the
 * event loop run in one transaction, so that they share one fsync (synchronous=FULL) instead
 * of paying one each. Nothing is weakened: a write's promise settles only after the
 * transaction that holds it has committed; a write that throws is rolled back alone (its
 * savepoint) and rejects with its error; when the transaction itself cannot commit, every
 * write of it rejects and none is stored.
 */
export class WriteBatcher {
  private pending: Pending[] = [];
  private scheduled = false;
  private readonly maxBatch: number;

  constructor(private readonly opts: WriteBatcherOptions) {
    this.maxBatch = opts.maxBatch ?? 64;
  }

  /** Runs `work` (a synchronous write, e.g. a repository method) in the next group commit. */
  run<T>(work: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ work, resolve: resolve as (value: unknown) => void, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    const batch = this.pending.splice(0, this.maxBatch);
    this.scheduled = this.pending.length > 0;
    if (this.scheduled) setImmediate(() => this.flush());
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
      return;
    }
    batch.forEach((item, i) => {
      const outcome = outcomes[i];
      if (outcome?.ok) item.resolve(outcome.value);
      else item.reject(outcome?.error);
    });
  }
}
