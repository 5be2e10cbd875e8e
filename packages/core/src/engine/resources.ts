import type { ChatModel } from "../llm/chat-model";
import type { Redactor } from "../util/redactor";
import type { RunStore } from "./run-store";

export interface EngineLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** What the engine's systems share. */
export interface EngineResources {
  store: RunStore;
  logger: EngineLogger;
  /** @defaultValue Date.now */
  now?: () => number;
  /** The environment commands are built from (filtered by `buildCommandEnv`). */
  commandEnv: Record<string, string | undefined>;
  /** Extra variable names commands may see (`AGENT_ENV_ALLOWLIST`). */
  envAllowlist: readonly string[];
  /** @defaultValue 65536 — bytes of output kept per command */
  outputCapBytes?: number;
  /** Applied to everything the engine writes (outputs, prompts, events, tool calls). */
  redactor?: Redactor;
  /** The LLM of `mistral` agents; without it they fail with a clear error. */
  llm?: ChatModel;
  /** @defaultValue "mistral-large-latest" — for runs that name no model */
  defaultModel?: string;
  /** @defaultValue 135000 — timeout of one MCP tool call (a workspace command's 120 s, its kill, and slack) */
  toolTimeoutMs?: number;
  /** @defaultValue 500 — how often a running iteration checks for a stop request or a lost lease */
  stopPollMs?: number;
  /**
   * Where workspace snapshots are kept: one bare git dir per session, `<dir>/<sessionId>.git`
   * (never inside the workspace). Needs `git` on PATH.
   * @defaultValue ".looprun/snapshots" (relative to the working directory)
   */
  snapshotsDir?: string;
  /** @defaultValue 60000 — timeout of one git command of a snapshot */
  snapshotTimeoutMs?: number;
  /**
   * @defaultValue 0 — files the snapshot store keeps made ahead for its next objects, with its
   * object directories and a git dir for the next new session (see snapshots/made-ahead.ts): a
   * long-lived worker's, removed when it closes (closeSnapshotsOf)
   */
  spareFiles?: number;
  /** @defaultValue 262144 — bytes of an iteration's diff stored (the rest is cut) */
  diffCapBytes?: number;
  /** @defaultValue 8388608 — a run's whole patch larger than this is not stored */
  patchCapBytes?: number;
  /**
   * @defaultValue 100 — how long an iteration runs before the snapshot diffs of the quicker
   * ones before it are computed beside it (see RunContext.scheduleRows)
   */
  snapshotRowsAfterMs?: number;
  /** @defaultValue 100000 — characters of the change an LLM reviewer is shown */
  reviewDiffCapChars?: number;
  /** @defaultValue ulid — ids of review artifacts */
  newId?: () => string;
}

export interface StepOptions {
  /** Fires when the worker shuts down: the iteration in flight is handed back. */
  shutdown?: AbortSignal;
  /** Fires when a stop request for this run reaches the worker (e.g. by pub/sub). */
  stop?: AbortSignal;
  /** Fires when the worker learns it lost the run (its job lock could not be renewed). */
  leaseLost?: AbortSignal;
  /**
   * Called as each iteration of the step is decided: the run moved on. The worker forgets its
   * job's earlier stalls then (crashes in different iterations are not a poison run).
   */
  onProgress?: () => void;
}
