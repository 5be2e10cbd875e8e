import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { useLauncher } from "@looprun/core";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { launcherPid } from "../src/process/launch";
import { gitEnv, runGit } from "../src/snapshots/git";
import { isAlive, readPids, removeDir, runIn, tempDir, waitFor } from "./support";

/** The launcher process that spawns a worker's commands (see src/process/launch.ts). */

let dir: string;
beforeAll(() => {
  process.env.LOOPRUN_LAUNCHER_TEST_SECRET = "not-for-the-launcher";
  useLauncher(true, { posixSpawn: false });
});
afterAll(() => useLauncher(false));
beforeEach(async () => {
  dir = await tempDir("looprun-launcher-");
});
afterEach(async () => {
  await removeDir(dir);
});

describe("the process launcher", () => {
  it("spawns the commands, not this process, and holds none of its environment", async () => {
    const result = await runIn(dir, "echo $PPID");
    const launcher = launcherPid();
    expect(launcher).toBeGreaterThan(0);
    expect(launcher).not.toBe(process.pid);
    expect(Number(result.output.trim())).toBe(launcher);
    // This process's environment (its secrets) never reaches the launcher's: only the IPC
    // channel's own variables are there.
    const environ = readFileSync(`/proc/${launcher}/environ`, "utf8").split("\0").filter(Boolean);
    expect(environ.filter((v) => !v.startsWith("NODE_CHANNEL_"))).toEqual([]);
  });

  it("runs git with its stdin and gives its output", async () => {
    const result = await runGit(["hash-object", "--stdin"], {
      env: gitEnv(process.env.PATH, dir),
      cwd: dir,
      timeoutMs: 10_000,
      stdin: "hello\n",
    });
    expect(result.exitCode).toBe(0);
    expect(result.stdout.trim()).toBe("ce013625030ba8dba906f756967f9e9ca394464a");
  });

  it("ends a command as killed, with its whole group, when the launcher dies", async () => {
    // Once the worker knows the command's pid (its group): a launcher killed before it told
    // leaves a command nobody knows of yet, for the run's orphan sweep (LOOPRUN_RUN_ID).
    let spawned = false;
    const running = runIn(dir, "echo $$ > pids; sleep 30 & echo $! >> pids; wait", {
      timeoutMs: 30_000,
      onSpawn: () => {
        spawned = true;
      },
    });
    const pidsFile = join(dir, "pids");
    await waitFor(
      () => spawned && existsSync(pidsFile) && readPids(pidsFile).length === 2,
      "the command started",
    );
    const launcher = launcherPid()!;
    process.kill(launcher, "SIGKILL");
    const result = await running;
    expect(result.exitCode).toBeNull();
    expect(result.signal).toBe("SIGKILL");
    await waitFor(() => readPids(pidsFile).every((pid) => !isAlive(pid)), "group dead");
    // The next command starts a new launcher.
    const next = await runIn(dir, "echo again");
    expect(next.output.trim()).toBe("again");
    expect(launcherPid()).not.toBe(launcher);
  });

  it("exits when the process it spawns for is killed", async () => {
    const script = join(dir, "parent.mts");
    const core = new URL("../src/index.ts", import.meta.url).pathname;
    writeFileSync(
      script,
      [
        `import { runCommand, useLauncher } from ${JSON.stringify(core)};`,
        `import { launcherPid } from ${JSON.stringify(core.replace("index.ts", "process/launch.ts"))};`,
        "useLauncher(true, { posixSpawn: false });",
        `await runCommand({ command: "true", cwd: ${JSON.stringify(dir)}, env: { PATH: "/usr/bin:/bin" }, timeoutMs: 10000 });`,
        "console.log(launcherPid());",
        "setInterval(() => {}, 1000);",
      ].join("\n"),
    );
    const parent = spawn(process.execPath, ["--import", "tsx", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const launcher = await new Promise<number>((resolve) =>
      parent.stdout.once("data", (chunk: Buffer) => resolve(Number(chunk.toString().trim()))),
    );
    expect(isAlive(launcher)).toBe(true);
    parent.kill("SIGKILL");
    await waitFor(() => !isAlive(launcher), "the launcher exited with its parent");
  });
});
