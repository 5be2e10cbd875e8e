import { promptFilePath, removePromptFile } from "../agents/command-agent";
import type { SessionRunSummary, ToolFailure } from "../agents/session-context";
import { budgetSnapshot } from "../budget/budget";
import { abandonedAgentFinished, type EventType, type NewEvent } from "../domain/events";
import type { IterationRecord, RunReason, RunRecord, RunStatus } from "../domain/run";
import { buildCommandEnv } from "../process/command-env";
import { killRunOrphans, RUN_ID_VARIABLE } from "../process/orphans";
import { LeaseLostError } from "../util/errors";
import { Redactor } from "../util/redactor";
import type { EngineResources } from "./resources";
import { restoresOnFailure, rollbackOnFailure } from "./rollback-on-failure";
import type { IterationPatch, MutationExtras, RunMutation, RunPatch } from "./run-store";

export type EventSpec = [type: EventType, data?: Record<string, unknown>, reason?: string];

/** How many of the session's earlier runs a prompt recalls. */
const HISTORY_RUNS = 10;

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
  /** Rows of a decided iteration not written yet (see `defer`), and their computation once started. */
  private deferred: (() => Promise<MutationExtras>) | null = null;
  private deferredRun: Promise<
    { ok: true; writes: MutationExtras } | { ok: false; error: unknown }
  > | null = null;
  /** The writes of this context, one after the other (see `commit`). */
  private writing: Promise<unknown> = Promise.resolve();

  /**
   * Hands over rows still to compute (an iteration's snapshot diffs: a git process), so that
   * the next iteration starts without waiting for them: `startDeferred` starts them (once the
   * next agent runs), and they are written as soon as they are ready, or by the first write
   * that does not pass `keepDeferred` before that. A worker that dies first leaves them out;
   * the run's next step writes them again (see backfillSnapshot).
   */
  defer(compute: () => Promise<MutationExtras>): void {
    if (this.deferred !== null) throw new Error("rows are already deferred: write them first");
    this.deferred = compute;
    this.deferredRun = null;
  }

  startDeferred(): void {
    const compute = this.deferred;
    if (compute === null || this.deferredRun !== null) return;
    const run = compute().then(
      (writes) => ({ ok: true as const, writes }),
      (error: unknown) => ({ ok: false as const, error }),
    );
    this.deferredRun = run;
    void run.then(() => {
      if (this.deferred !== compute) return; // a write took them meanwhile
      this.commit({}).catch((error: unknown) => {
        if (error instanceof LeaseLostError) return;
        this.res.logger.warn({ err: error, runId: this.run.id }, "could not write snapshot rows");
      });
    });
  }

  get hasDeferred(): boolean {
    return this.deferred !== null;
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
   * handed to `defer`, unless `keepDeferred` (a write that must not wait for them). The writes
   * of a context go one after the other, in the order they were asked for (a write that
   * records a command's process group runs beside the engine's own).
   */
  commit(
    patch: RunPatch,
    events: EventSpec[] = [],
    iteration: MutationExtras = {},
    opts: { keepDeferred?: boolean } = {},
  ): Promise<RunRecord> {
    const done = this.writing.then(() => this.write(patch, events, iteration, opts));
    this.writing = done.catch(() => {});
    return done;
  }

  private async write(
    patch: RunPatch,
    events: EventSpec[],
    iteration: MutationExtras,
    opts: { keepDeferred?: boolean },
  ): Promise<RunRecord> {
    let extras = iteration;
    if (this.deferred !== null && !opts.keepDeferred) {
      this.startDeferred();
      const running = this.deferredRun;
      this.deferred = null;
      this.deferredRun = null;
      const settled = await running;
      if (settled && !settled.ok) throw settled.error;
      if (settled) {
        // Rows of the same kind (this write's own snapshot and change) go after them.
        const clash = Object.keys(settled.writes).some((key) => key in iteration);
        if (clash) await this.write({}, [], settled.writes, { keepDeferred: true });
        else extras = { ...settled.writes, ...iteration };
      }
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
    const iteration = open ? this.updateIteration({ ...extra.iteration, finishedAt: now }) : {};
    // An attempt ended while its agent ran, with no result to record (its worker died, an
    // error cut the step): its agent gets its `agent_finished`, as every agent does.
    const abandoned =
      open?.status === "running" &&
      extra.iteration?.agent === undefined &&
      !extra.events?.some(([type]) => type === "agent_finished")
        ? abandonedAgentFinished(open, now)
        : null;
    const agentEnd: EventSpec[] = abandoned ? [["agent_finished", abandoned]] : [];
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
