import { MAX_TIMER_MS } from "./env-int";

/** A signal that also aborts after a time, and the means to let it go once it is not needed. */
export interface TimeoutSignal {
  signal: AbortSignal;
  /** Ends the timer (and the watch on the parent): call it once the work is done. */
  clear(): void;
}

/**
 * `parent`, also aborted after `ms` (with a `TimeoutError`, as `AbortSignal.timeout` does) — what
 * `AbortSignal.any([parent, AbortSignal.timeout(ms)])` says, which Node 20 lets the garbage
 * collector undo: the combined signal holds its sources weakly, and a collection while it
 * waits takes the timeout away, which then never fires (a hung LLM call waited until the run's
 * deadline). Here the timer itself holds the signal.
 */
export function timeoutSignal(parent: AbortSignal, ms: number): TimeoutSignal {
  const controller = new AbortController();
  // No time at all (an infinite one) sets no timer; past what a timer can wait (about 24.8
  // days) it waits that long — setTimeout would fire at once.
  const timer = Number.isFinite(ms)
    ? setTimeout(
        () => {
          controller.abort(
            new DOMException("The operation was aborted due to timeout", "TimeoutError"),
          );
        },
        Math.min(Math.max(0, ms), MAX_TIMER_MS),
      )
    : null;
  // As AbortSignal.timeout's: the timer alone does not keep the process running.
  timer?.unref();
  const onAbort = () => controller.abort(parent.reason);
  if (parent.aborted) onAbort();
  else parent.addEventListener("abort", onAbort, { once: true });
  return {
    signal: controller.signal,
    clear() {
      if (timer !== null) clearTimeout(timer);
      parent.removeEventListener("abort", onAbort);
    },
  };
}
