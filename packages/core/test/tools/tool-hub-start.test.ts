import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { McpConnectError, ToolHub } from "../../src/tools/index";
import { isAlive, removeDir, tempDir, waitFor } from "./helpers";

// A server that starts but never answers the initialisation (as one stuck downloading, or
// waiting on a resource), writing its pid first.
const HANGS =
  "require('fs').writeFileSync(process.argv[1], String(process.pid)); setInterval(() => {}, 1000)";

let dir: string;
beforeEach(async () => {
  dir = await tempDir();
});
afterEach(() => removeDir(dir));

function hanging(name: string) {
  const pidFile = join(dir, `${name}.pid`);
  return {
    spec: { name, command: process.execPath, args: ["-e", HANGS, pidFile] },
    pid: async () => {
      await waitFor(
        () => existsSync(pidFile) && readFileSync(pidFile, "utf8") !== "",
        `${name} to start`,
      );
      return Number(readFileSync(pidFile, "utf8"));
    },
  };
}

describe("ToolHub start-up", () => {
  // Without the signal, both would wait out the 50 s connect timeout: longer than the tests'.
  it("ends at once when its signal is aborted, stopping the servers it started", {
    timeout: 20_000,
  }, async () => {
    const a = hanging("a");
    const b = hanging("b");
    const controller = new AbortController();
    const connecting = ToolHub.connect([a.spec, b.spec], {
      connectTimeoutMs: 50_000,
      signal: controller.signal,
    }).catch((e: unknown) => e);
    const pids = [await a.pid(), await b.pid()];
    controller.abort();
    const error = await connecting;
    expect(error).toBeInstanceOf(McpConnectError);
    expect((error as Error).message).toContain("start-up was cancelled");
    for (const pid of pids) await waitFor(() => !isAlive(pid), `server ${pid} to be stopped`);
  });

  it("refuses an already aborted signal without starting anything", {
    timeout: 20_000,
  }, async () => {
    // A server that marks its start at once and outlives the SIGTERM of a transport closed
    // right after it was spawned: started at all, it leaves the mark.
    const marker = join(dir, "started");
    const spec = {
      name: "a",
      command: "sh",
      args: ["-c", `trap '' TERM; : > '${marker}'; sleep 3`],
    };
    const error = await ToolHub.connect([spec], {
      connectTimeoutMs: 50_000,
      signal: AbortSignal.abort(),
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpConnectError);
    await new Promise((r) => setTimeout(r, 1000));
    expect(existsSync(marker)).toBe(false);
  });

  it("cancels the others' start-up when one server fails, and names that one", {
    timeout: 20_000,
  }, async () => {
    const slow = hanging("slow");
    const connecting = ToolHub.connect(
      [
        slow.spec,
        {
          name: "crash",
          command: "sh",
          // Fails once the other is running, so that there is something to cancel.
          args: [
            "-c",
            `while [ ! -s '${join(dir, "slow.pid")}' ]; do sleep 0.05; done; echo 'boom' >&2; exit 1`,
          ],
        },
      ],
      { connectTimeoutMs: 50_000 },
    ).catch((e: unknown) => e);
    const pid = await slow.pid();
    const error = await connecting;
    expect(error).toBeInstanceOf(McpConnectError);
    expect((error as McpConnectError).server).toBe("crash");
    expect((error as Error).message).toContain("boom");
    await waitFor(() => !isAlive(pid), "the other server to be stopped");
  });
});
