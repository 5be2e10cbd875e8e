import type { EngineResources, StepOptions } from "./resources";
import type { RunContext } from "./run-context";

export type Interruption = "stopped" | "deadline" | "shutdown" | "lease_lost";

export interface InterruptionWatch {
  /** Aborts the commands of the iteration in flight. */
  signal: AbortSignal;
  /** Why the iteration must end now, if it must (`msLeft`: time before the deadline). */
  interruption(msLeft: number): Interruption | null;
  dispose(): void;
}

/**
 * Watches for what ends an iteration early: a stop request (pushed through `opts.stop`, or
 * seen in the store by polling), the worker shutting down, another worker taking the run
 * (its epoch moved on), and the run's deadline.
 */
export function watchInterruptions(
  res: EngineResources,
  ctx: RunContext,
  opts: StepOptions,
): InterruptionWatch {
  const controller = new AbortController();
  let why: Interruption | null = null;
  const interrupt = (reason: Interruption) => {
    why ??= reason;
    controller.abort(reason);
  };
  const onStop = () => interrupt("stopped");
  const onShutdown = () => interrupt("shutdown");
  const onLeaseLost = () => interrupt("lease_lost");
  if (opts.leaseLost?.aborted) onLeaseLost();
  if (opts.stop?.aborted) onStop();
  if (opts.shutdown?.aborted) onShutdown();
  opts.stop?.addEventListener("abort", onStop, { once: true });
  opts.shutdown?.addEventListener("abort", onShutdown, { once: true });
  opts.leaseLost?.addEventListener("abort", onLeaseLost, { once: true });

  let polling = false;
  const poll = setInterval(async () => {
    if (polling) return;
    polling = true;
    try {
      const current = await res.store.getRun(ctx.run.id);
      if (current === null || current.epoch !== ctx.epoch) interrupt("lease_lost");
      else if (current.status === "stopping") interrupt("stopped");
    } catch (error) {
      res.logger.warn({ err: error, runId: ctx.run.id }, "stop poll failed");
    } finally {
      polling = false;
    }
  }, res.stopPollMs ?? 500);
  poll.unref();

  return {
    signal: controller.signal,
    interruption(msLeft) {
      if (why) return why;
      return msLeft <= 0 ? "deadline" : null;
    },
    dispose() {
      clearInterval(poll);
      opts.stop?.removeEventListener("abort", onStop);
      opts.shutdown?.removeEventListener("abort", onShutdown);
      opts.leaseLost?.removeEventListener("abort", onLeaseLost);
    },
  };
}
