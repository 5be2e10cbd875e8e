import { describe, expect, it } from "vitest";

// The run page's event lines (assets/events.js, browser code without DOM use in these two
// functions): imported by URL, as the page does, so the test needs no types for it.
const events = (await import(
  new URL("../src/dashboard/assets/events.js", import.meta.url).href
)) as {
  describe: (e: { type: string; data: Record<string, unknown> }) => string;
  roleOf: (type: string) => string;
};

describe("the run page's event lines", () => {
  it("say that a completion promise was missing, among the gates", () => {
    const e = { type: "promise_missing", data: { iteration: 1, completionPromise: "DONE" } };
    expect(events.describe(e)).toBe(
      "completion promise missing: no <promise>DONE</promise> at a line's end",
    );
    expect(events.roleOf("promise_missing")).toBe("validation");
    expect(events.roleOf("validation_failed")).toBe("validation");
  });
});
