import { describe, expect, it } from "vitest";
import { type EventView, shorten } from "../src/commands/watch-events";
import { Progress } from "../src/commands/watch-progress";

// What `looprun watch` prints of events whose text an agent (or a tool, or a person) produced:
// terminal escape sequences in it must reach the terminal as nothing, not as commands.

const ESC = "\x1b[2J\x1b]0;owned\x07\x1b[31m\x9b1A\r\b\x00\x7f";
const budget = { elapsedMs: 1000, remainingIterations: 5 };
const event = (seq: number, type: string, data: Record<string, unknown>): EventView => ({
  seq,
  type,
  data: { ...data, budget },
});
/** Control characters but newline and tab. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

describe("watch prints event text without control characters", () => {
  for (const tty of [false, true]) {
    it(`on ${tty ? "a terminal" : "a pipe"}`, () => {
      const written: string[] = [];
      const progress = new Progress({ write: (t) => written.push(t), isTTY: tty }, 5, "RUN1");
      progress.event(event(1, "approval_requested", { kind: "plan", plan: `1. do${ESC}\n2. it` }));
      progress.event(event(2, "approval_requested", { kind: "question", question: `why${ESC}?` }));
      progress.event(
        event(3, "tool_called", { iteration: 1, server: `ws${ESC}`, tool: `t${ESC}` }),
      );
      progress.event(event(4, "approval_rejected", { kind: "plan", reason: `no${ESC}` }));
      progress.event(event(5, "reply_received", { message: `yes${ESC}` }));
      progress.event(
        event(6, "run_finished", { status: "failed", reason: "error", summary: `bad${ESC}` }),
      );
      progress.event(event(7, `custom${ESC}_type`, {}));
      progress.finish();
      // A terminal gets the progress line's own sequences (clear line): the rest is text.
      const text = written.join("").replaceAll("\r\x1b[2K", "");
      expect(text).not.toMatch(CONTROL);
      expect(text).toContain("1. do[2J]0;owned[31m1A\n  2. it");
      expect(text).toContain("the agent asks: why[2J]0;owned[31m1A?");
      expect(text).toContain("tool ws[2J]0;owned[31m1A.t[2J]0;owned[31m1A");
      expect(text).toContain("plan rejected: no[2J]");
      expect(text).toContain("answered: yes[2J]");
      expect(text).toContain("— bad[2J]");
    });
  }
});

describe("watch says what ended a command", () => {
  it("names an agent or a validation command killed (no exit code) as such, not as 'null'", () => {
    const written: string[] = [];
    const progress = new Progress({ write: (t) => written.push(t), isTTY: false }, 5, "RUN1");
    progress.event(event(1, "agent_finished", { iteration: 1, exitCode: null, durationMs: 504 }));
    progress.event(event(2, "agent_finished", { iteration: 2, exitCode: 3, durationMs: 20 }));
    progress.event(
      event(4, "agent_finished", {
        iteration: 3,
        exitCode: null,
        durationMs: 7100,
        abandoned: true,
      }),
    );
    progress.event(
      event(3, "validation_failed", {
        iteration: 2,
        results: [
          { command: "npm test", exitCode: null },
          { command: "npm run lint", exitCode: 1 },
        ],
      }),
    );
    const text = written.join("");
    expect(text).not.toContain("null");
    expect(text).toContain("agent killed (timed out, stopped or signalled) after 504 ms");
    expect(text).toContain("agent exited 3 after 20 ms");
    expect(text).toContain(
      "agent abandoned (its worker died or lost the run), found after 7100 ms",
    );
    expect(text).toContain("validation failed: npm test → killed, npm run lint → 1");
  });
});

describe("watch says why an iteration whose commands passed goes round again", () => {
  it("prints a missing completion promise", () => {
    const written: string[] = [];
    const progress = new Progress({ write: (t) => written.push(t), isTTY: false }, 5, "RUN1");
    progress.event(event(1, "validation_passed", { iteration: 1, results: [] }));
    progress.event(event(2, "promise_missing", { iteration: 1, completionPromise: "DONE" }));
    progress.finish();
    expect(written.join("")).toContain(
      "completion promise missing: no <promise>DONE</promise> at a line's end",
    );
  });
});

describe("shorten", () => {
  it("cuts at a character as a person counts it, never in half", () => {
    expect(shorten("😀".repeat(100), 50)).toBe(`${"😀".repeat(49)}…`);
    expect(shorten("👨‍👩‍👧 family", 2)).toBe("👨‍👩‍👧…");
    expect(shorten("e\u0301te\u0301", 3)).toBe("e\u0301te\u0301");
    expect(shorten("short", 50)).toBe("short");
    expect(shorten("x".repeat(51), 50)).toBe(`${"x".repeat(49)}…`);
  });
});
