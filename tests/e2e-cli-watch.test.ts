import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import { commandRun, runCli, type Stack, startStack, submit } from "./support/stack";

// `looprun watch` as a person sees it.

let stack: Stack;
let cliEnv: Record<string, string | undefined>;
const cleanups: (() => Promise<unknown> | unknown)[] = [];

beforeAll(async () => {
  stack = await startStack({ redisUrl: inject("redisUrl") });
  cliEnv = { PATH: process.env.PATH, HOME: process.env.HOME, LOOPRUN_URL: stack.url };
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

afterAll(async () => {
  await stack?.stop();
});

describe("looprun watch", () => {
  it("names the phase of phase events", async () => {
    const { id } = await submit(
      stack,
      commandRun('[ -n "$LOOPRUN_PHASE" ] && echo "1. touch done"; touch done', {
        testCommand: "test -f done",
        phases: ["planning"],
      }),
    );
    const watch = await runCli(["watch", id], cliEnv);
    expect(watch.code, watch.output).toBe(0);
    expect(watch.stdout).toContain("planning phase started");
    expect(watch.stdout).toContain("planning phase completed");
  });
});
