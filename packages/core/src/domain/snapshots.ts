/** The workspace as it was after one iteration: a commit in the session's snapshot git dir. */
export interface IterationSnapshot {
  runId: string;
  n: number;
  attempt: number;
  snapshotId: string;
  /** The snapshot this one is compared with: the previous iteration's, or the baseline. */
  parentId: string;
  /** Unified diff parent → this snapshot, cut at `diffTruncated`. */
  diff: string;
  /** Size of the whole diff. */
  diffBytes: number;
  diffTruncated: boolean;
  createdAt: number;
}

/** A run's whole change so far: its baseline snapshot → its latest one. */
export interface RunChange {
  runId: string;
  baselineSnapshot: string;
  headSnapshot: string;
  /** The iteration whose snapshot is the head. */
  iteration: number;
  /** Paths changed, relative to the workspace. */
  files: string[];
  /** `git diff --stat`. */
  stat: string;
  /** A patch `git apply` applies to the baseline; `null` when larger than the cap. */
  patch: string | null;
  patchBytes: number;
  updatedAt: number;
}
