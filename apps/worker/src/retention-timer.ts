import { WorkspaceSnapshots } from "@looprun/core";
import type { RunRepositoryPort } from "@looprun/db";
import { snapshotsDirOf, type WorkerEnv } from "./env";
import { pruneHistory, type RetentionOptions } from "./retention";

/**
 * Runs `pruneHistory` at the worker's start and every `LOOPRUN_RETENTION_CHECK_MS`, one pass at
 * a time, when `LOOPRUN_RETENTION_DAYS` is set. `pruning` settles when the pass in flight ends.
 */
export function startRetention(
  env: WorkerEnv,
  repo: Pick<RunRepositoryPort, "retention">,
  signal: AbortSignal,
  logger: RetentionOptions["logger"],
): { readonly pruning: Promise<unknown>; stop(): void } {
  const days = env.LOOPRUN_RETENTION_DAYS;
  if (days === undefined) return { pruning: Promise.resolve(), stop() {} };
  const snapshots = new WorkspaceSnapshots({ root: snapshotsDirOf(env) });
  const state = { pruning: Promise.resolve() as Promise<unknown>, running: false };
  const pass = () => {
    if (state.running || signal.aborted) return;
    state.running = true;
    state.pruning = pruneHistory({
      repo,
      snapshots,
      retentionMs: days * 86_400_000,
      logger,
      signal,
      ...(env.WORKSPACES_ROOT !== undefined ? { workspacesRoot: env.WORKSPACES_ROOT } : {}),
    })
      .catch((err: unknown) => logger.warn({ err }, "could not delete the runs past the retention"))
      .finally(() => {
        state.running = false;
      });
  };
  pass();
  const timer = setInterval(pass, env.LOOPRUN_RETENTION_CHECK_MS);
  timer.unref();
  return {
    get pruning() {
      return state.pruning;
    },
    stop() {
      clearInterval(timer);
    },
  };
}
