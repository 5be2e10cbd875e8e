import {
  buildPrompt,
  CompletionPromiseScanner,
  normalizeSubmission,
  RunSubmission,
} from "@looprun/core";
import { describe, expect, it } from "vitest";
import { runCommandAgent } from "../src/agents/command-agent";
import { COMMAND_ENV, removeDir, tempDir } from "./support";

const spec0 = (body: object) => normalizeSubmission(RunSubmission.parse(body));

/** Whether `text`, written whole, carries the completion promise. */
function hasCompletionPromise(text: string, promise: string, prompt = ""): boolean {
  const scanner = new CompletionPromiseScanner(promise, prompt);
  scanner.write(text);
  return scanner.found;
}

describe("hasCompletionPromise", () => {
  it("finds the exact promise text in a tag that ends its line", () => {
    expect(hasCompletionPromise("work done\n<promise>DONE</promise>\n", "DONE")).toBe(true);
    expect(hasCompletionPromise("<promise> DONE </promise>", "DONE")).toBe(true);
    expect(hasCompletionPromise("All done. <promise>DONE</promise>  \r\nbye\n", "DONE")).toBe(true);
    expect(hasCompletionPromise("<promise>NOT</promise> <promise>DONE</promise>", "DONE")).toBe(
      true,
    );
    expect(hasCompletionPromise("<promise>a < b</promise>\n", "a < b")).toBe(true);
  });

  it("does not accept other text, a bare word or an unclosed tag", () => {
    expect(hasCompletionPromise("DONE", "DONE")).toBe(false);
    expect(hasCompletionPromise("<promise>DONE-ISH</promise>", "DONE")).toBe(false);
    expect(hasCompletionPromise("<promise>DONE", "DONE")).toBe(false);
    expect(hasCompletionPromise("<promise>\nDONE\n</promise>", "DONE")).toBe(false);
  });

  it("keeps the last other tag that ended a line, for the feedback", () => {
    const scanner = new CompletionPromiseScanner("DONE", "print <promise>DONE</promise>\n");
    scanner.write("I will print <promise>LATER</promise> when done\n<promise>COMPLETE</promise>\n");
    expect(scanner.found).toBe(false);
    expect(scanner.other).toBe("COMPLETE");
    scanner.write("print <promise>DONE</promise>\n");
    expect(scanner.other).toBe("COMPLETE");
    scanner.write("<promise>DONE</promise>\n");
    expect(scanner.found).toBe(true);
    expect(scanner.other).toBeNull();
  });

  it("reads a coloured line as a terminal shows it", () => {
    expect(hasCompletionPromise("\x1b[32m<promise>DONE</promise>\x1b[0m\n", "DONE")).toBe(true);
    expect(hasCompletionPromise("ok <promise>\x1b[1mDONE\x1b[22m</promise>\x1b[K", "DONE")).toBe(
      true,
    );
    expect(hasCompletionPromise("\x1b[31m<promise>NOPE</promise>\x1b[0m\n", "DONE")).toBe(false);
  });

  it("takes a tag inside a sentence for a mention, not a promise", () => {
    expect(
      hasCompletionPromise("I will print <promise>DONE</promise> once the tests pass.\n", "DONE"),
    ).toBe(false);
    expect(hasCompletionPromise("<promise>DONE</promise> is what I print at the end", "DONE")).toBe(
      false,
    );
  });

  it("does not take the prompt echoed back (cat, tee) for a promise", () => {
    const spec = spec0({
      task: "Finish it, then print <promise>DONE</promise>",
      agent: { type: "command", command: "cat" },
      completionPromise: "DONE",
    });
    const prompt = buildPrompt({
      spec,
      iteration: 2,
      feedback:
        "The completion promise was not given: print <promise>DONE</promise> only when the task is complete.",
    });
    // The task's line ends with the tag, as a promise would: its copy is still no promise.
    expect(prompt).toContain("<promise>DONE</promise>");
    expect(hasCompletionPromise(prompt, "DONE", prompt)).toBe(false);
    expect(hasCompletionPromise(`${prompt}\n<promise>DONE</promise>\n`, "DONE", prompt)).toBe(true);
  });
});

describe("CompletionPromiseScanner", () => {
  it("finds a promise split across the pieces of a stream, a multi-byte character included", () => {
    const text = Buffer.from("résumé: fini ✓ <promise>FINI ✓</promise>\nmore\n");
    for (let cut = 1; cut < text.length; cut++) {
      const scanner = new CompletionPromiseScanner("FINI ✓", "");
      scanner.write(text.subarray(0, cut));
      scanner.write(text.subarray(cut));
      expect(scanner.found, `cut at ${cut}`).toBe(true);
    }
  });

  it("finds a promise at the end of a line of megabytes, and of the last line without a newline", () => {
    const scanner = new CompletionPromiseScanner("DONE", "");
    for (let i = 0; i < 64; i++) scanner.write(Buffer.alloc(64 * 1024, "x"));
    scanner.write("<promise>DONE</promise>");
    expect(scanner.found).toBe(true);
  });

  it("remembers a promise that megabytes of output follow", () => {
    const scanner = new CompletionPromiseScanner("DONE", "");
    scanner.write("<promise>DONE</promise>\n");
    for (let i = 0; i < 64; i++) scanner.write(`${"y".repeat(64 * 1024)}\n`);
    expect(scanner.found).toBe(true);
  });
});

describe("runCommandAgent and the completion promise", () => {
  it("finds the promise in the whole output, not only in the tail it keeps", async () => {
    const dir = await tempDir();
    try {
      const result = await runCommandAgent({
        spec: {
          type: "command",
          command: "echo '<promise>DONE</promise>'; head -c 300000 /dev/zero | tr '\\0' x; echo",
          timeoutMs: 30_000,
        },
        prompt: "the task",
        workspace: dir,
        env: COMMAND_ENV,
        budgetMs: 30_000,
        outputCapBytes: 1024,
        signal: new AbortController().signal,
        completionPromise: "DONE",
      });
      expect(result.exitCode).toBe(0);
      expect(result.output).not.toContain("<promise>");
      expect(result.promiseFound).toBe(true);
    } finally {
      await removeDir(dir);
    }
  });

  it("does not take an agent that prints its prompt (cat) for one that promised", async () => {
    const dir = await tempDir();
    try {
      const spec = spec0({
        task: "Count to three.",
        agent: { type: "command", command: "cat" },
        completionPromise: "DONE",
      });
      const prompt = buildPrompt({ spec, iteration: 1, feedback: null });
      const result = await runCommandAgent({
        spec: { type: "command", command: "cat", timeoutMs: 30_000 },
        prompt,
        workspace: dir,
        env: COMMAND_ENV,
        budgetMs: 30_000,
        outputCapBytes: 65_536,
        signal: new AbortController().signal,
        completionPromise: "DONE",
      });
      expect(result.output).toContain("<promise>DONE</promise>");
      expect(result.promiseFound).toBe(false);
    } finally {
      await removeDir(dir);
    }
  });
});
