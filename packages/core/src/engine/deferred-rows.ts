import type { MutationExtras } from "./run-store";
import type { PendingSnapshot } from "./snapshot-step";

/**
 * The snapshot rows of decided iterations that are not written yet (see
 * RunContext.deferSnapshot): an iteration's diffs cost a git request, which beside a command
 * of a few milliseconds slowed it more than the request itself took (bench/RESULTS.md, the
 * twenty-sixth session). So they are computed beside a later iteration once it has run a
 * while (`afterMs`) — the rows of the quicker iterations before it together, in one request —
 * or at once when `SNAPSHOT_ROWS_BATCH` have gathered, and by whoever needs them first (the
 * write that ends the run or the step).
 */

/** How many decided iterations' snapshot rows may wait for a later one. */
export const SNAPSHOT_ROWS_BATCH = 16;

/** How long an iteration runs before the pending snapshot rows are computed beside it. */
export const ROWS_AFTER_MS = 100;

/** Snapshot rows, as a write carries them. */
export type SnapshotRowWrites = Pick<MutationExtras, "insertSnapshots" | "change">;

type SettledRows = { ok: true; writes: SnapshotRowWrites } | { ok: false; error: unknown };

/** Rows being computed (or computed) for some pending snapshots. */
export interface RowsBatch {
  readonly rows: Promise<SettledRows>;
}

export interface DeferredRowsOptions {
  /** The rows of pending snapshots that followed one another, oldest first. */
  compute(pending: PendingSnapshot[]): Promise<SnapshotRowWrites>;
  /** A batch started beside an iteration is ready: the owner writes it (see `take`). */
  ready(batch: RowsBatch): void;
  afterMs: number;
}

export class DeferredRows {
  /** Decided iterations whose rows are not computed yet, oldest first. */
  private pending: PendingSnapshot[] = [];
  /** Rows being computed for earlier pending snapshots (one batch at a time). */
  private batch: RowsBatch | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly opts: DeferredRowsOptions) {}

  get any(): boolean {
    return this.pending.length > 0 || this.batch !== null;
  }

  defer(snapshot: PendingSnapshot): void {
    this.pending.push(snapshot);
  }

  /** An iteration starts: the pending rows are computed beside it, at once or in a while. */
  schedule(): void {
    this.dispose();
    if (this.pending.length >= SNAPSHOT_ROWS_BATCH) this.start();
    else if (this.pending.length > 0) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.start();
      }, this.opts.afterMs);
      this.timer.unref();
    }
  }

  /** Stops the timer (the step is over, or the rows are being taken). */
  dispose(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  /** The rows of a ready batch, unless another call took them first (then null). */
  take(batch: RowsBatch): Promise<SnapshotRowWrites> | null {
    if (this.batch !== batch) return null;
    this.batch = null;
    return batch.rows.then(settledRows);
  }

  /** Every deferred row: the batch being computed, and the pending ones computed now. */
  async drain(): Promise<SnapshotRowWrites> {
    this.dispose();
    const batch = this.batch;
    this.batch = null;
    const pending = this.pending.splice(0);
    const parts: SnapshotRowWrites[] = [];
    if (batch !== null) parts.push(settledRows(await batch.rows));
    if (pending.length > 0) parts.push(await this.opts.compute(pending));
    return parts.reduce(mergeRows, {});
  }

  private start(): void {
    if (this.batch !== null || this.pending.length === 0) return;
    const rows = this.opts.compute(this.pending.splice(0)).then(
      (writes) => ({ ok: true as const, writes }),
      (error: unknown) => ({ ok: false as const, error }),
    );
    const batch: RowsBatch = { rows };
    this.batch = batch;
    void rows.then(() => {
      if (this.batch === batch) this.opts.ready(batch);
    });
  }
}

function settledRows(settled: SettledRows): SnapshotRowWrites {
  if (!settled.ok) throw settled.error;
  return settled.writes;
}

/** Rows of earlier snapshots, then a write with later ones: the rows of both, the later change. */
export function mergeRows<T extends MutationExtras>(earlier: SnapshotRowWrites, later: T): T {
  const insertSnapshots = [...(earlier.insertSnapshots ?? []), ...(later.insertSnapshots ?? [])];
  const change = later.change ?? earlier.change;
  return {
    ...later,
    ...(insertSnapshots.length > 0 ? { insertSnapshots } : {}),
    ...(change ? { change } : {}),
  };
}
