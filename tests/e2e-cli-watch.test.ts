import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import {
  commandRun,
  LOOPRUN_BIN,
  type ManagedProcess,
  runCli,
  type Stack,
  spawnManaged,
  startStack,
  submit,
  waitFor,
} from "./support/stack";

// `looprun watch` as a person sees it: a reader that stops reading.

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

/**
 * Submits a run that goes on for a while (each iteration changes the workspace: no `stalled`),
 * stopped after the test so that it leaves the workers to the next one.
 */
async function submitLongRun(rest: Record<string, unknown> = {}): Promise<string> {
  const { id } = await submit(
    stack,
    commandRun("echo x >> lines; sleep 0.3", { testCommand: "false", maxIterations: 200, ...rest }),
  );
  cleanups.push(() => stack.api("POST", `/api/runs/${id}/stop`));
  return id;
}

/** `looprun watch ID`, its output piped to this test. */
function startWatch(id: string, env = cliEnv): ManagedProcess {
  const watch = spawnManaged("looprun watch", process.execPath, [LOOPRUN_BIN, "watch", id], {
    env,
  });
  cleanups.push(() => watch.stop("SIGKILL"));
  return watch;
}

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

  it("ends quietly when its reader goes away (`looprun watch ID | head -1`)", async () => {
    const id = await submitLongRun();
    const watch = startWatch(id);
    await waitFor(() => watch.stdout().length > 0, { message: "the first line" });
    watch.child.stdout?.destroy();

    const exit = await watch.exited;
    // As a C program killed by SIGPIPE (128 + 13): no stack trace, no "Error: write EPIPE".
    expect(exit.code, watch.output()).toBe(141);
    expect(watch.output()).not.toMatch(/EPIPE|Error|\n\s+at /);
  });
});
