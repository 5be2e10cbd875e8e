import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { runStep } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { makeRun, removeDir, resources, tempDir } from "./support";

let dir: string;
let ws: string;
beforeEach(async () => {
  dir = await tempDir("looprun-prompt-file-");
  ws = join(dir, "ws");
  mkdirSync(ws);
});
afterEach(async () => {
  await removeDir(dir);
});

describe("the prompt file of a command agent", () => {
  it("is one file per run in the worker's 0700 directory, holding each iteration's prompt, removed when the step ends", async () => {
    const store = new MemoryRunStore();
    const agent = [
      'n="$LOOPRUN_ITERATION"',
      'echo "$LOOPRUN_PROMPT_FILE" > "path-$n"',
      'cp "$LOOPRUN_PROMPT_FILE" "prompt-$n"',
    ].join("; ");
    const run = makeRun(
      {
        agent: { type: "command", command: agent },
        testCommand: "test -f prompt-2",
        cooldownMs: 0,
      },
      ws,
    );
    store.add(run);
    expect(await runStep(resources(store), run.id)).toMatchObject({ status: "succeeded" });

    const path = readFileSync(join(ws, "path-1"), "utf8").trim();
    expect(readFileSync(join(ws, "path-2"), "utf8").trim()).toBe(path);
    expect(path.startsWith(ws)).toBe(false);
    const [first, second] = store.iterationsOf(run.id);
    expect(readFileSync(join(ws, "prompt-1"), "utf8")).toBe(first?.prompt);
    expect(readFileSync(join(ws, "prompt-2"), "utf8")).toBe(second?.prompt);
    expect(existsSync(path)).toBe(false);
    expect(statSync(dirname(path)).mode & 0o777).toBe(0o700);
  });
});
