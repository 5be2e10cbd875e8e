import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { unlessAborted } from "../src/util/unless-aborted";

describe("unlessAborted", () => {
  it("answers as the promise does, and leaves no listener on the signal", async () => {
    const controller = new AbortController();
    for (let i = 0; i < 20; i++) {
      expect(await unlessAborted(Promise.resolve(i), controller.signal)).toBe(i);
      await expect(
        unlessAborted(Promise.reject(new Error(`no ${i}`)), controller.signal),
      ).rejects.toThrow(`no ${i}`);
    }
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
  });

  it("rejects with the signal's reason when it aborts first, or was aborted already", async () => {
    const controller = new AbortController();
    const never = new Promise<never>(() => {});
    const pending = unlessAborted(never, controller.signal);
    controller.abort(new Error("stopped"));
    await expect(pending).rejects.toThrow("stopped");
    await expect(unlessAborted(never, controller.signal)).rejects.toThrow("stopped");
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
  });
});
