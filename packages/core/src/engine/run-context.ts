import { promptFilePath, removePromptFile } from "../agents/command-agent";
import type { SessionRunSummary, ToolFailure } from "../agents/session-context";
import { budgetSnapshot } from "../budget/budget";
import {
  abandonedAgent,
  abandonedAgentFinished,
  type EventType,
  type NewEvent,
} from "../domain/events";
import type { IterationRecord, RunReason, RunRecord, RunStatus } from "../domain/run";
import { buildCommandEnv } from "../process/command-env";
import { killRunOrphans, RUN_ID_VARIABLE } from "../process/orphans";
import { LeaseLostError } from "../util/errors";
import { Redactor } from "../util/redactor";
import {
  DeferredRows,
  mergeRows,
  ROWS_AFTER_MS,
  type RowsBatch,
  type SnapshotRowWrites,
} from "./deferred-rows";
import type { EngineResources } from "./resources";
import { restoresOnFailure, rollbackOnFailure } from "./rollback-on-failure";
import type { IterationPatch, MutationExtras, RunMutation, RunPatch } from "./run-store";
import { type PendingSnapshot, snapshotRows } from "./snapshot-step";

export type EventSpec = [type: EventType, data?: Record<string, unknown>, reason?: string];

/** How many of the session's earlier runs a prompt recalls. */
const HISTORY_RUNS = 10;

interface WriteOptions {
  /** The write does not wait for the deferred snapshot rows (see deferSnapshot). */
  keepDeferred?: boolean;
  /** Writes only this batch of rows, now ready (unless another write took it). */
  rowsOf?: RowsBatch;
}

/**
 * What the store gets for a write of `run`: the events carry the run's budget as it is after
 * the write, and secrets are redacted.
 */
export function mutationOf(
  res: Pick<EngineResources, "redactor">,
  run: RunRecord,
  patch: RunPatch,
  events: EventSpec[],
  extras: MutationExtras,
  now: number,
): RunMutation {
  const after: RunRecord = { ...run, ...patch } as RunRecord;
  const newEvents: NewEvent[] = events.map(([type, data = {}, reason]) => ({
    type,
    data: { ...data, budget: budgetSnapshot(after, now, reason) },
  }));
  const mutation: RunMutation = { run: patch, events: newEvents, ...extras };
  return res.redactor ? res.redactor.deep(mutation) : mutation;
}

/** The engine's view of one claimed run: its latest state and the epoch it writes with. */
export class RunContext {
  /** The workers' redactor, with the secrets this run's step came to hold (keepSecrets). */
  private redactor: Redactor | undefined;

  constructor(
    private readonly res: EngineResources,
    public run: RunRecord,
    readonly epoch: number,
    public lastIteration: IterationRecord | null,
    public lastDecided: IterationRecord | null,
  ) {
    this.redactor = res.redactor;
    this.rows = new DeferredRows({
      compute: async (pending) => (await snapshotRows(res, this, pending)).writes,
      ready: (batch) => {
        this.commit({}, [], {}, { rowsOf: batch }).catch((error: unknown) => {
          if (error instanceof LeaseLostError) return;
          res.logger.warn({ err: error, runId: this.run.id }, "could not write snapshot rows");
        });
      },
      afterMs: res.snapshotRowsAfterMs ?? ROWS_AFTER_MS,
    });
  }

  /**
   * Values this step's writes (and its error log) must not hold from now on: what `${NAME}`
   * put into a tool server's credentials, for example — the workers' own redactor knows only
   * the variables whose names look secret.
   */
  keepSecrets(values: readonly string[]): void {
    if (values.length > 0) this.redactor = (this.redactor ?? new Redactor()).with(values);
  }

  /**
   * Whether a stop request is in the store now: read once more before a decision ends the run
   * (the stop poll and the writes' rows may not have shown one that came in a moment ago).
   */
  async stopRequestedNow(): Promise<boolean> {
    const current = await this.res.store.getRun(this.run.id);
    return current?.status === "stopping" && current.epoch === this.epoch;
  }

  /** `value` (a text, or every string in it) with this step's secrets redacted. */
  redact<T>(value: T): T {
    return this.redactor ? this.redactor.deep(value) : value;
  }

  private history: Promise<SessionRunSummary[]> | null = null;
  private prompt: string | null = null;

  /**
   * The file a command agent gets its prompt in ($LOOPRUN_PROMPT_FILE) during this step: one
   * per run and epoch, rewritten for each agent run, removed when the step ends.
   */
  promptFile(): string {
    this.prompt ??= promptFilePath(`${this.run.id}-${this.epoch}`);
    return this.prompt;
  }

  /** Removes the step's prompt file, if it made one. */
  async releasePromptFile(): Promise<void> {
    if (this.prompt === null) return;
    const path = this.prompt;
    this.prompt = null;
    await removePromptFile(path);
  }

  /** Snapshot rows of decided iterations, not written yet (see deferSnapshot). */
  private readonly rows: DeferredRows;
  /** The writes of this context, one after the other (see `commit`). */
  private writing: Promise<unknown> = Promise.resolve();

  /**
   * Hands over a decided iteration's snapshot whose rows (its diffs: a git process) are still
   * to compute, so that the next iteration starts without waiting for them. They are computed
   * beside a later iteration (see deferred-rows.ts) and written when ready, or by the first
   * write that does not pass `keepDeferred` before that. A worker that dies first leaves them
   * out; the run's next step writes them again (see backfillSnapshot).
   */
  deferSnapshot(pending: PendingSnapshot): void {
    this.rows.defer(pending);
  }

  /** An iteration starts: the deferred rows may be computed beside it (deferred-rows.ts). */
  scheduleRows(): void {
    this.rows.schedule();
  }

  /** Stops what this context left to timers (its step is over). */
  dispose(): void {
    this.rows.dispose();
  }

  /**
   * The deferred rows, computed now if they are not yet, for the caller to write itself (with
   * the decision that ends the run, which needs the run's change).
   */
  takeDeferredRows(): Promise<SnapshotRowWrites> {
    const taken = this.writing.then(() => this.rows.drain());
    this.writing = taken.catch(() => {});
    return taken;
  }

  get hasDeferred(): boolean {
    return this.rows.any;
  }

  now(): number {
    return (this.res.now ?? Date.now)();
  }

  /**
   * The session's runs before this one, for the prompt: read once per step, as they cannot
   * change while this run is active (one active run per session: they have all ended).
   */
  sessionHistory(): Promise<SessionRunSummary[]> {
    this.history ??= this.res.store.sessionHistory(this.run.sessionId, this.run.id, HISTORY_RUNS);
    return this.history;
  }

  /**
   * The environment of the run's commands at `iteration` (0: a preparation phase): the
   * allowed part of the worker's, and what tells a command which run, session, workspace and
   * worker it belongs to (a command's parent may be the worker's launcher, not the worker).
   */
  commandEnv(iteration: number): Record<string, string> {
    return buildCommandEnv(this.res.commandEnv, this.res.envAllowlist, {
      [RUN_ID_VARIABLE]: this.run.id,
      LOOPRUN_SESSION_ID: this.run.sessionId,
      LOOPRUN_ITERATION: String(iteration),
      LOOPRUN_WORKSPACE: this.run.workspace,
      LOOPRUN_WORKER_PID: String(process.pid),
    });
  }

  /** The run's failed tool calls so far (only the mistral agent calls tools). */
  toolFailures(): Promise<ToolFailure[]> {
    return this.run.spec.agent.type === "mistral"
      ? this.res.store.toolFailures(this.run.id, 20)
      : Promise.resolve([]);
  }

  /**
   * Applies a run patch, iteration changes and events in one fenced write — with the rows
   * handed to `deferSnapshot`, unless `keepDeferred` (a write that must not wait for them). The
   * writes of a context go one after the other, in the order they were asked for (a write that
   * records a command's process group runs beside the engine's own).
   */
  commit(
    patch: RunPatch,
    events: EventSpec[] = [],
    iteration: MutationExtras = {},
    opts: WriteOptions = {},
  ): Promise<RunRecord> {
    const done = this.writing.then(() => this.write(patch, events, iteration, opts));
    this.writing = done.catch(() => {});
    return done;
  }

  private async write(
    patch: RunPatch,
    events: EventSpec[],
    iteration: MutationExtras,
    opts: WriteOptions,
  ): Promise<RunRecord> {
    let extras = iteration;
    if (opts.rowsOf !== undefined) {
      // A batch of rows, ready: unless a write took it meanwhile.
      const rows = this.rows.take(opts.rowsOf);
      if (rows === null) return this.run;
      extras = mergeRows(await rows, iteration);
    } else if (this.rows.any && !opts.keepDeferred) {
      // This write's own rows (a newer snapshot's, and its change) go after them.
      extras = mergeRows(await this.rows.drain(), iteration);
    }
    // Nothing to write (the rows it was for went with another write).
    if (Object.keys(patch).length === 0 && events.length === 0 && Object.keys(extras).length === 0)
      return this.run;
    const now = this.now();
    this.run = await this.res.store.commit(
      this.run.id,
      this.epoch,
      mutationOf({ redactor: this.redactor }, this.run, patch, events, extras, now),
      now,
    );
    const ended = extras.updateIteration;
    if (ended && this.unstoredEnd?.n === ended.n && this.unstoredEnd.attempt === ended.attempt) {
      if (ended.patch.status !== undefined && ended.patch.status !== "running") {
        this.unstoredEnd = null;
      }
    }
    return this.run;
  }

  /**
   * The iteration whose end (a status other than `running`) is set in `lastIteration` but not
   * stored yet: should that write fail, `finish` still ends the iteration with the run.
   */
  private unstoredEnd: { n: number; attempt: number } | null = null;

  updateIteration(patch: IterationPatch): Pick<RunMutation, "updateIteration"> {
    const it = this.lastIteration;
    if (it === null) return {};
    this.lastIteration = { ...it, ...patch };
    if (patch.status !== undefined && patch.status !== "running" && it.status === "running") {
      this.unstoredEnd = { n: it.n, attempt: it.attempt };
    }
    return { updateIteration: { n: it.n, attempt: it.attempt, patch } };
  }

  /** Whether the iteration in flight is still `running` in the store. */
  private iterationOpen(): boolean {
    const it = this.lastIteration;
    if (it === null) return false;
    return (
      it.status === "running" ||
      (this.unstoredEnd?.n === it.n && this.unstoredEnd.attempt === it.attempt)
    );
  }

  /**
   * Ends the run; marks the iteration in flight, if any, with `iteration`. A `failed` run
   * with `rollbackOnFailure` has its workspace restored to the baseline first.
   */
  async finish(
    status: RunStatus,
    reason: RunReason,
    summary: string,
    extra: {
      events?: EventSpec[];
      iteration?: IterationPatch;
      patch?: RunPatch;
      writes?: MutationExtras;
    } = {},
  ): Promise<void> {
    // Once: the run's processes are searched for in every process's environment.
    let orphansEnded = false;
    const endOrphans = () => {
      if (!orphansEnded) killRunOrphans(this.run);
      orphansEnded = true;
    };
    if (status === "stopped" && this.run.startedAt !== null) {
      // `stopped` means the run's processes are dead: a crashed worker's orphans, and those that
      // left its commands' process groups (setsid), found by the run id they carry. Not before
      // a fenced write has shown that this worker still holds the run (another would be
      // running its commands).
      await this.commit({ progress: "stopping: ending the run's processes" });
      endOrphans();
    }
    if (status === "failed" && restoresOnFailure(this.run)) {
      // The restore rewrites the workspace: not before a fenced write has shown that this
      // worker still holds the run (another one may have taken it and be working there), nor
      // while a process the run left behind may still write there.
      await this.commit({ progress: "restoring the workspace as it was before the run" });
      endOrphans();
    }
    const rollback = status === "failed" ? await rollbackOnFailure(this.res, this.run) : [];
    const now = this.now();
    const open = extra.iteration && this.iterationOpen() ? this.lastIteration : null;
    // An attempt ended while its agent ran, with no result to record (its worker died, an
    // error cut the step): its agent gets a result (killed) and its `agent_finished`, as every
    // agent does.
    const agent =
      open?.status === "running" &&
      extra.iteration?.agent === undefined &&
      !extra.events?.some(([type]) => type === "agent_finished")
        ? abandonedAgent(open, now)
        : null;
    const iteration = open
      ? this.updateIteration({ ...extra.iteration, finishedAt: now, ...(agent ? { agent } : {}) })
      : {};
    const agentEnd: EventSpec[] =
      open && agent ? [["agent_finished", abandonedAgentFinished(open.n, agent)]] : [];
    await this.commit(
      {
        ...extra.patch,
        status,
        reason,
        summary,
        finishedAt: now,
        progress: summary,
        activePgid: null,
      },
      [
        ...agentEnd,
        ...(extra.events ?? []),
        ...rollback,
        ["run_finished", { status, reason, summary }, reason],
      ],
      { ...extra.writes, ...iteration },
    );
    // Whatever ended it, nothing of a finished run runs on: what its commands left outside their
    // process groups (setsid; a group is killed when its command ends) dies with the run. After
    // the run's last fenced write, so surely this worker's run, which no one can take again.
    endOrphans();
  }
}
