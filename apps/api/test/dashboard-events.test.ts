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

  it("tell a killed agent as killed, not as exited null", () => {
    const killed = {
      type: "agent_finished",
      data: { iteration: 1, exitCode: null, durationMs: 1500 },
    };
    expect(events.describe(killed)).toMatch(/^agent killed after /);
    const exited = {
      type: "agent_finished",
      data: { iteration: 1, exitCode: 2, durationMs: 1500 },
    };
    expect(events.describe(exited)).toMatch(/^agent exited 2 after /);
    const abandoned = {
      type: "agent_finished",
      data: { iteration: 1, exitCode: null, durationMs: 7100, abandoned: true },
    };
    expect(events.describe(abandoned)).toMatch(
      /^agent abandoned \(its worker died or lost the run\), found after /,
    );
  });
});

describe("the dashboard's truncate", () => {
  it("cuts at a character as a person counts it, never in half", async () => {
    const format = (await import(
      new URL("../src/dashboard/assets/format.js", import.meta.url).href
    )) as { truncate: (text: string, n: number) => string };
    expect(format.truncate("😀".repeat(100), 50)).toBe(`${"😀".repeat(49)}…`);
    expect(format.truncate("short", 50)).toBe("short");
    expect(format.truncate("x".repeat(51), 50)).toBe(`${"x".repeat(49)}…`);
  });
});

describe("the dashboard's time budget", () => {
  it("says what is left so that it adds up with what is shown as elapsed", async () => {
    const format = (await import(
      new URL("../src/dashboard/assets/format.js", import.meta.url).href
    )) as { timeBudgetLeft: (elapsedMs: number, maxMs: number) => string };
    expect(format.timeBudgetLeft(2600, 45 * 60_000)).toBe("00:02 elapsed · 44:58 left of 45:00");
    expect(format.timeBudgetLeft(0, 60_000)).toBe("00:00 elapsed · 01:00 left of 01:00");
    expect(format.timeBudgetLeft(61_000, 60_000)).toBe("01:01 elapsed · 00:00 left of 01:00");
  });
});
