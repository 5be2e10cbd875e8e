import { realpath } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  DEFAULT_COMMAND_TIMEOUT_MS,
  ToolHub,
  workspaceCallTimeoutMs,
  workspaceServerLaunch,
} from "../../src/tools/index";
import { removeDir, tempDir } from "./helpers";

// A command that reaches its timeout is killed and reported by the server, output included;
// the client's timeout must not fire first (it did: both were 120 s), which loses the output.

let root: string;
let hub: ToolHub;
const COMMAND_MS = 1000;

beforeAll(async () => {
  root = await realpath(await tempDir());
  hub = await ToolHub.connect(
    [
      {
        name: "ws",
        ...workspaceServerLaunch(
          root,
          { PATH: process.env.PATH ?? "" },
          { commandTimeoutMs: COMMAND_MS },
        ),
        cwd: root,
      },
    ],
    { requestTimeoutMs: workspaceCallTimeoutMs(COMMAND_MS) },
  );
});
afterAll(async () => {
  await hub.close();
  await removeDir(root);
});

describe("run_command at its timeout, through the hub", () => {
  it("reports the timeout with the output, even for a command that ignores SIGTERM", async () => {
    // SIGTERM is ignored: it takes the kill's grace and SIGKILL to end.
    const r = await hub.call("ws__run_command", {
      command: "trap '' TERM; echo step-1-output; echo 'FAILED test_x' >&2; sleep 30",
    });
    expect(r.isError).toBe(true);
    expect(r.result).toContain(`timed out after ${COMMAND_MS} ms`);
    expect(r.result).toContain("step-1-output");
    expect(r.result).toContain("FAILED test_x");
  });

  it("gives the default command timeout the same room", () => {
    expect(workspaceCallTimeoutMs()).toBeGreaterThanOrEqual(DEFAULT_COMMAND_TIMEOUT_MS + 10_000);
  });
});

describe("run_command's output, through the hub", () => {
  it("comes in the order the command wrote it, stdout and stderr (one pipe, as 2>&1)", async () => {
    const { isError, result } = await hub.call("ws__run_command", {
      command: "i=0; while [ $i -lt 200 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done",
    });
    expect(isError).toBe(false);
    const lines = Array.from({ length: 200 }, (_, i) => `out${i}\nerr${i}\n`).join("");
    expect(result).toContain(lines);
  });
});
