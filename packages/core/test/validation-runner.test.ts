import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { capTail } from "../src/util/cut-marks";
import {
  FEEDBACK_OUTPUT_BYTES,
  feedbackShares,
  runValidation,
  type ValidationInput,
  validationFeedback,
} from "../src/validation/validation-runner";
import { removeDir, tempDir, waitFor } from "./support";

let dir: string;
beforeEach(async () => {
  dir = await tempDir();
});
afterEach(async () => {
  await removeDir(dir);
});

function input(commands: string[], extra: Partial<ValidationInput> = {}): ValidationInput {
  return {
    commands,
    workspace: dir,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    timeoutMs: 60_000,
    deadlineMs: 60_000,
    outputCapBytes: 65_536,
    signal: new AbortController().signal,
    ...extra,
  };
}

describe("runValidation", () => {
  it("passes when every command exits 0", async () => {
    const outcome = await runValidation(input(["true", "echo fine"]));
    expect(outcome.passed).toBe(true);
    expect(outcome.interrupted).toBeNull();
    expect(outcome.results.map((r) => [r.command, r.exitCode, r.output])).toEqual([
      ["true", 0, ""],
      ["echo fine", 0, "fine\n"],
    ]);
  });

  it("runs every command even after a failure, and the feedback names each failure", async () => {
    const outcome = await runValidation(
      input(["echo lint broke; exit 2", "true", "echo tests broke >&2; exit 1"]),
    );
    expect(outcome.passed).toBe(false);
    expect(outcome.results.map((r) => r.exitCode)).toEqual([2, 0, 1]);
    expect(validationFeedback(outcome.results)).toBe(
      "$ echo lint broke; exit 2\n(exit code 2)\nlint broke\n\n$ echo tests broke >&2; exit 1\n(exit code 1)\ntests broke",
    );
    // A command that printed nothing ends at its exit code: no empty line.
    const silent = await runValidation(input(["exit 3"]));
    expect(validationFeedback(silent.results)).toBe("$ exit 3\n(exit code 3)");
  });

  it("keeps the end of each failed command's output in the feedback, 32 KiB for them all", () => {
    const failed = (n: number) => ({
      command: `check-${n}`,
      exitCode: 1,
      durationMs: 1,
      output: `${"x".repeat(300_000)}\nthe end of check-${n}`,
    });
    const feedback = validationFeedback([failed(1), failed(2), failed(3)]);
    expect(Buffer.byteLength(feedback)).toBeLessThan(FEEDBACK_OUTPUT_BYTES + 1024);
    for (const n of [1, 2, 3]) expect(feedback).toContain(`the end of check-${n}`);
    expect(feedback).toContain("bytes of earlier output omitted");
    // However many fail, each keeps its output's last lines.
    const many = validationFeedback(Array.from({ length: 20 }, (_, i) => failed(i)));
    for (let i = 0; i < 20; i++) expect(many).toContain(`the end of check-${i}`);
  });

  it("gives a failed command's output as a terminal shows it, cut after it is rendered", () => {
    const output = `${"bar\r".repeat(20_000)}ok\n\x1b[31mFAIL\x1b[0m cart\u0000 total\r\n`;
    const feedback = validationFeedback([
      { command: "npm test", exitCode: 1, durationMs: 1, output },
    ]);
    // A progress bar's 80,000 bytes were one line a terminal showed as "ok": nothing to cut.
    expect(feedback).toBe("$ npm test\n(exit code 1)\nok\nFAIL cart total");
  });

  it("leaves the room short outputs do not need to the long ones, and counts every byte a cut omitted", () => {
    const stored = capTail(`${"y".repeat(200_000)}\nthe end of the log`, 65_536, "earlier output");
    const feedback = validationFeedback([
      { command: "lint", exitCode: 3, durationMs: 1, output: "lint-fail" },
      { command: "big", exitCode: 2, durationMs: 1, output: stored },
      { command: "types", exitCode: 4, durationMs: 1, output: "types-fail" },
    ]);
    expect(feedback).toContain("lint-fail");
    expect(feedback).toContain("types-fail");
    const big = feedback.slice(feedback.indexOf("$ big"), feedback.indexOf("$ types"));
    // Nearly all of the 32 KiB (the two others need a few bytes).
    expect(Buffer.byteLength(big)).toBeGreaterThan(FEEDBACK_OUTPUT_BYTES - 100);
    expect(Buffer.byteLength(feedback)).toBeLessThan(FEEDBACK_OUTPUT_BYTES + 300);
    // What the stored output omitted and what the feedback omitted of it: all but its tail.
    const total = Buffer.byteLength(`${"y".repeat(200_000)}\nthe end of the log`);
    const omitted = Number(/\[… (\d+) bytes of earlier output omitted …\]/.exec(big)?.[1]);
    const kept = Buffer.byteLength(big.slice(big.indexOf("omitted …]\n") + 11).trimEnd());
    expect(omitted + kept).toBe(total);
    expect(big.trimEnd()).toMatch(/the end of the log$/);
  });

  it("shares the feedback's room shortest first, at least 4 KiB each", () => {
    // The short ones are offered a fair part (more than they need); the long one the rest.
    expect(feedbackShares([10, 100_000, 20], 32_768, 4096)).toEqual([10_922, 32_738, 16_379]);
    expect(feedbackShares([10, 100_000, 100_000], 32_768, 4096)).toEqual([10_922, 16_379, 16_379]);
    expect(feedbackShares(Array(10).fill(100_000), 32_768, 4096)).toEqual(Array(10).fill(4096));
    expect(feedbackShares([50_000, 50_000], 32_768, 4096)).toEqual([16_384, 16_384]);
    expect(feedbackShares([], 32_768, 4096)).toEqual([]);
  });

  it("counts a command's own timeout as a failure, not an interruption", async () => {
    const outcome = await runValidation(input(["sleep 30", "echo next"], { timeoutMs: 200 }));
    expect(outcome.interrupted).toBeNull();
    expect(outcome.passed).toBe(false);
    expect(outcome.results.map((r) => r.exitCode)).toEqual([null, 0]);
    expect(validationFeedback(outcome.results)).toContain("(exit code none: killed)");
    expect(validationFeedback(outcome.results)).toContain("killed after the timeout of 200 ms");
  });

  it("is interrupted by the deadline", async () => {
    const outcome = await runValidation(input(["sleep 30", "touch never"], { deadlineMs: 200 }));
    expect(outcome).toMatchObject({ passed: false, interrupted: "deadline" });
    expect(outcome.results).toHaveLength(1);
    expect(existsSync(join(dir, "never"))).toBe(false);
  });

  it("is interrupted by an abort", async () => {
    const controller = new AbortController();
    const pending = runValidation(
      input(["touch started; sleep 30", "touch never"], { signal: controller.signal }),
    );
    await waitFor(() => existsSync(join(dir, "started")), "the command to start");
    controller.abort();
    const outcome = await pending;
    expect(outcome).toMatchObject({ passed: false, interrupted: "aborted" });
    expect(existsSync(join(dir, "never"))).toBe(false);
  });

  it("waits for onCommandStart before each command, and stops on its rejection", async () => {
    const calls: string[] = [];
    await runValidation(
      input(["echo one > one", "echo two > two"], {
        onCommandStart: async (index, command) => {
          await new Promise((r) => setTimeout(r, 10));
          calls.push(`${index}:${command}:${existsSync(join(dir, index === 0 ? "one" : "two"))}`);
        },
      }),
    );
    expect(calls).toEqual(["0:echo one > one:false", "1:echo two > two:false"]);

    const failure = new Error("lease lost");
    await expect(
      runValidation(
        input(["touch first", "touch second"], {
          onCommandStart: async (index) => {
            if (index === 1) throw failure;
          },
        }),
      ),
    ).rejects.toBe(failure);
    expect(existsSync(join(dir, "first"))).toBe(true);
    expect(existsSync(join(dir, "second"))).toBe(false);
  });

  it("passes with no commands", async () => {
    expect(await runValidation(input([]))).toEqual({
      results: [],
      passed: true,
      interrupted: null,
    });
  });
});
