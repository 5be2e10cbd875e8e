import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type CommandResult,
  type EngineResources,
  normalizeSubmission,
  queuedRun,
  type RunCommandOptions,
  type RunMutation,
  type RunRecord,
  type RunStore,
  RunSubmission,
  runCommand,
  WorkspaceSnapshots,
} from "@looprun/core";

import { MemoryRunStore } from "@looprun/core/testing";
import { isAlive, runsForRun } from "../../../tests/support/processes";
import { testSnapshotsDir } from "../../../tests/support/snapshots-dir";

/**
 * Shared with every suite (tests/support): whether a process is alive, or a command of a run,
 * the snapshots directory.
 */
export { isAlive, runsForRun, testSnapshotsDir };

/**
 * A memory store whose first write that `faultOn` picks does not go through: `fault` answers it
 * instead — a rejection (a database busy or gone), or a promise that never settles (the worker
 * died during the write). `faultOn` is cleared once it has picked one.
 */
export class FaultyStore extends MemoryRunStore {
  faultOn: ((m: RunMutation) => boolean) | null = null;

  constructor(private readonly fault: () => Promise<RunRecord>) {
    super();
  }

  override async commit(
    runId: string,
    epoch: number,
    m: RunMutation,
    now: number,
  ): Promise<RunRecord> {
    if (this.faultOn?.(m)) {
      this.faultOn = null;
      return this.fault();
    }
    return super.commit(runId, epoch, m, now);
  }
}

/** The environment commands get in these tests: PATH alone. */
export const COMMAND_ENV = { PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin" };

/** `sh -c command` in `dir` through runCommand: COMMAND_ENV, 10 s, unless `extra` says otherwise. */
export function runIn(
  dir: string,
  command: string,
  extra: Partial<RunCommandOptions> = {},
): Promise<CommandResult> {
  return runCommand({ command, cwd: dir, env: COMMAND_ENV, timeoutMs: 10_000, ...extra });
}

/** A fresh temporary directory; `cleanup` removes it. */
export async function tempDir(prefix = "looprun-test-"): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}

export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

/** Reads whitespace-separated pids from a file. */
export function readPids(path: string): number[] {
  return readFileSync(path, "utf8")
    .split(/\s+/)
    .filter((s) => s.length > 0)
    .map(Number);
}

/** Polls `condition` until it holds; fails with `what` after `timeoutMs`. */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 15_000,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

let counter = 0;

/** A queued run built from a submission body (`task` and `agent` have placeholders). */
export function makeRun(
  body: Record<string, unknown>,
  workspace: string,
  opts: { id?: string; sessionId?: string; createdAt?: number } = {},
): RunRecord {
  counter += 1;
  const spec = normalizeSubmission(
    RunSubmission.parse({
      task: "make the checks pass",
      agent: { type: "command", command: "true" },
      ...body,
    }),
  );
  return queuedRun({
    // Padded: run ids sort in the order they were made, as real ones (UUIDv7) do; stores rely
    // on it ("earlier runs" of a session are the smaller ids), and `run-1-10` < `run-1-9`.
    id: opts.id ?? `run-${process.pid}-${String(counter).padStart(6, "0")}`,
    sessionId: opts.sessionId ?? `session-${process.pid}-${counter}`,
    spec,
    workspace,
    createdAt: opts.createdAt ?? Date.now(),
  });
}

export const silentLogger = { info() {}, warn() {}, error() {} };

export function resources(store: RunStore, extra: Partial<EngineResources> = {}): EngineResources {
  return {
    store,
    logger: silentLogger,
    commandEnv: process.env,
    envAllowlist: [],
    stopPollMs: 50,
    snapshotsDir: testSnapshotsDir(),
    ...extra,
  };
}

/** A new temp dir (named by `prefix`) with a WorkspaceSnapshots rooted in its `snapshots/`. */
export async function snapshotsIn(
  prefix: string,
): Promise<{ dir: string; snapshots: WorkspaceSnapshots }> {
  const dir = await tempDir(prefix);
  return { dir, snapshots: new WorkspaceSnapshots({ root: join(dir, "snapshots") }) };
}

/** Ends what snapshotsIn made: its git processes, and its dir. */
export async function dropSnapshots(made: { dir: string; snapshots: WorkspaceSnapshots }) {
  made.snapshots.close();
  await removeDir(made.dir);
}
