import { setTimeout as sleep } from "node:timers/promises";

/**
 * Checks `done` every `stepMs` until it holds or `timeoutMs` has passed; resolves with whether
 * it held. For a short wait on something outside (a job's state, requests in flight).
 */
export async function waitUntil(
  done: () => boolean | Promise<boolean>,
  timeoutMs: number,
  stepMs = 20,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await done()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(stepMs);
  }
}
