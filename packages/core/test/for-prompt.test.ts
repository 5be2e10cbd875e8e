import { buildPrompt, forPrompt } from "@looprun/core";
import { describe, expect, it } from "vitest";
import { makeRun } from "./support";

describe("forPrompt", () => {
  it("leaves out colours, cursor moves and control bytes, and keeps each line as last shown", () => {
    expect(forPrompt("\x1b[31mFAIL\x1b[0m cart.test.ts\n")).toBe("FAIL cart.test.ts\n");
    expect(forPrompt("\x1b]8;;https://x.test\x07link\x1b]8;;\x07")).toBe("link");
    expect(forPrompt("10%\r50%\r100%\ndone\r\n")).toBe("100%\ndone\n");
    expect(forPrompt("a\u0000b\u0007c\u007fd\te")).toBe("abcd\te");
    expect(forPrompt("plain text, ünïcödé ✓\n")).toBe("plain text, ünïcödé ✓\n");
  });

  it("cleans what outputs bring into a prompt, not the task as written", () => {
    const { spec } = makeRun({ task: "fix \x1b[1mit\x1b[0m", testCommand: "npm test" }, "/ws");
    const prompt = buildPrompt({
      spec,
      iteration: 2,
      feedback: "Validation failed:\n\n$ npm test\n(exit code 1)\n\x1b[31m✗ adds\x1b[39m\u0000\n",
      toolFailures: [
        { iteration: 1, server: "workspace", tool: "run_command", args: {}, error: "\x1b[2Kboom" },
      ],
    });
    expect(prompt).toContain("(exit code 1)\n✗ adds\n");
    expect(prompt).toContain("failed: boom");
    expect(prompt).toContain("fix \x1b[1mit\x1b[0m");
  });
});
