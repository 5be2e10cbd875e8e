import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { timeoutSignal } from "../src/util/timeout-signal";

/** A full garbage collection (the flag set at run time, `gc` taken from a fresh context). */
function collect(): void {
  setFlagsFromString("--expose-gc");
  (runInNewContext("gc") as () => void)();
}

describe("timeoutSignal", () => {
  it("aborts after its time with a TimeoutError, and with the parent's reason before", async () => {
    const parent = new AbortController();
    const timed = timeoutSignal(parent.signal, 30);
    await new Promise((r) => setTimeout(r, 80));
    expect(timed.signal.aborted).toBe(true);
    expect((timed.signal.reason as DOMException).name).toBe("TimeoutError");

    const stopped = timeoutSignal(parent.signal, 60_000);
    parent.abort(new Error("stop"));
    expect(stopped.signal.reason).toEqual(new Error("stop"));
    stopped.clear();
    timed.clear();
  });

  it("waits for ever for an infinite time, and as long as a timer can for more (not at once)", async () => {
    const never = timeoutSignal(new AbortController().signal, Number.POSITIVE_INFINITY);
    const long = timeoutSignal(new AbortController().signal, 2 ** 33);
    await new Promise((r) => setTimeout(r, 50));
    expect([never.signal.aborted, long.signal.aborted]).toEqual([false, false]);
    never.clear();
    long.clear();
  });

  it("does not abort once cleared", async () => {
    const timed = timeoutSignal(new AbortController().signal, 20);
    timed.clear();
    await new Promise((r) => setTimeout(r, 60));
    expect(timed.signal.aborted).toBe(false);
  });

  it("fires after a garbage collection while it waits (AbortSignal.any's timeout does not on Node 20)", async () => {
    const timed = timeoutSignal(new AbortController().signal, 150);
    let fired = false;
    timed.signal.addEventListener("abort", () => {
      fired = true;
    });
    await new Promise((r) => setTimeout(r, 20));
    collect();
    await new Promise((r) => setTimeout(r, 300));
    expect(fired).toBe(true);
  });
});
