import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { runCommand, useLauncher } from "@looprun/core";
import { posixSpawn, unavailable } from "@looprun/spawn";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { launch } from "../src/process/launch";
import { gitEnv, runGit } from "../src/snapshots/git";
import { removeDir, tempDir } from "./support";

/**
 * What spawning through the spawn addon (packages/spawn, src/process/posix-launch.ts) must keep of
 * Node's spawn; the rest of runCommand's behaviour is run-command.test.ts's, which runs through
 * it too.
 */

const ENV = { PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin" };

let dir: string;
beforeAll(() => {
  process.env.LOOPRUN_POSIX_SPAWN_TEST_SECRET = "not-for-commands";
  useLauncher(true);
});
afterAll(() => useLauncher(false));
beforeEach(async () => {
  dir = await tempDir("looprun-posix-spawn-");
});
afterEach(async () => {
  await removeDir(dir);
});

const run = (command: string, stdin?: string) =>
  runCommand({
    command,
    cwd: dir,
    env: ENV,
    timeoutMs: 10_000,
    ...(stdin !== undefined ? { stdin } : {}),
  });

describe("spawning without copying this process (the spawn addon)", () => {
  it("is built on Linux, as better-sqlite3 is (a C compiler is there)", () => {
    expect(process.platform).toBe("linux");
    expect(unavailable).toBeNull();
    expect(posixSpawn).not.toBeNull();
  });

  it("starts the command as a child of this process, with only the environment it is given", async () => {
    const result = await run("echo $PPID; env");
    const [ppid, ...environ] = result.output.trim().split("\n");
    expect(Number(ppid)).toBe(process.pid);
    expect(result.output).not.toContain("not-for-commands");
    expect(environ).toContain(`PATH=${ENV.PATH}`);
  });

  it("starts it in a session and process group of its own", async () => {
    // /proc/PID/stat: pid (comm) state ppid pgrp session
    const result = await run("cut -d' ' -f1,5,6 /proc/$$/stat");
    const [pid, pgrp, session] = result.output.trim().split(" ").map(Number);
    expect(pgrp).toBe(pid);
    expect(session).toBe(pid);
  });

  it("gives signals their defaults: a pipe's reader that quits ends its writer (SIGPIPE)", async () => {
    // Node ignores SIGPIPE; inherited, `yes` would get EPIPE and complain instead of dying.
    const result = await run("yes | head -n 1");
    expect(result.exitCode).toBe(0);
    expect(result.output).toBe("y\n");
  });

  it("starts it with no signal ignored or blocked, whatever this process ignores, catches or blocks", async () => {
    // This process ignores SIGPIPE (Node) and here SIGHUP too, and catches SIGUSR2: the child
    // resets what the parent's /proc status names before it unblocks any signal.
    const onUsr2 = () => {};
    process.on("SIGUSR2", onUsr2);
    const hup = process.listeners("SIGHUP");
    process.on("SIGHUP", () => {});
    try {
      const own = readFileSync("/proc/self/status", "utf8");
      expect(own).toMatch(/\nSigCgt:\t[0-9a-f]*[1-9a-f][0-9a-f]*\n/);
      const result = await run("grep -E '^Sig(Ign|Blk):' /proc/self/status");
      expect(result.output).toBe("SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
    } finally {
      process.off("SIGUSR2", onUsr2);
      process.removeAllListeners("SIGHUP");
      for (const listener of hup) process.on("SIGHUP", listener);
    }
  });

  it("feeds a string to its stdin, and tells the signal that killed it", async () => {
    const result = await run("cat; kill -USR1 $$", "from the caller\n");
    expect(result.output).toBe("from the caller\n");
    expect(result.exitCode).toBeNull();
    expect(result.signal).toBe("SIGUSR1");
  });

  it("finds a program in the command's PATH, and fails one it cannot find as Node does", async () => {
    const git = await runGit(["--version"], { env: gitEnv(ENV.PATH, dir), timeoutMs: 10_000 });
    expect(git.stdout).toMatch(/^git version /);

    const missing = launch("no-such-program-here", [], { env: { PATH: dir }, cwd: dir });
    const events: string[] = [];
    missing.on("spawn", () => events.push("spawn"));
    missing.on("close", () => events.push("close"));
    const error = await new Promise<NodeJS.ErrnoException>((resolve) =>
      missing.on("error", resolve),
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(error.code).toBe("ENOENT");
    expect(events).toEqual([]);
  });

  it("passes over a directory in PATH named as the program, and runs a script without #! by sh", async () => {
    const first = `${dir}/first`;
    const second = `${dir}/second`;
    mkdirSync(`${first}/tool`, { recursive: true });
    mkdirSync(second);
    writeFileSync(`${second}/tool`, 'echo "tool ran with $1"\n');
    chmodSync(`${second}/tool`, 0o755);
    const tool = launch("tool", ["an-argument"], { env: { PATH: `${first}:${second}` }, cwd: dir });
    let output = "";
    tool.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const code = await new Promise((resolve) => {
      tool.on("close", resolve);
      tool.on("error", (error) => resolve(`error: ${error.message}`));
    });
    expect(output).toBe("tool ran with an-argument\n");
    expect(code).toBe(0);
  });

  it("refuses a NUL byte in the command instead of running what comes before it", async () => {
    const result = await run("touch cut\0rm -rf everything");
    expect(result.exitCode).toBeNull();
    expect(result.output).toContain("NUL");
    expect(readdirSync(dir)).toEqual([]);
  });

  it("names a signal as Node does (SIGABRT, not its alias SIGIOT)", async () => {
    const result = await run("kill -ABRT $$");
    expect(result.signal).toBe("SIGABRT");
  });

  it("keeps a command's stdio apart when this process has closed its own stdin and stdout", () => {
    // Its pipes then get descriptors 0 and 1: each is moved above 2 before the child's dup2s.
    const script = `${dir}/closed-stdio.mts`;
    const core = new URL("../src/index.ts", import.meta.url).pathname;
    writeFileSync(
      script,
      [
        'import { closeSync, writeFileSync } from "node:fs";',
        `import { runCommand, useLauncher } from ${JSON.stringify(core)};`,
        "useLauncher(true);",
        "closeSync(0);",
        "closeSync(1);",
        `const options = { cwd: ${JSON.stringify(dir)}, env: { PATH: "/usr/bin:/bin" }, timeoutMs: 10000 };`,
        // First: the pipe for its stdin would get descriptors 0 and 1 here.
        'const fed = await runCommand({ command: "cat; echo to-stdout", stdin: "to-stdin\\n", ...options });',
        'const empty = await runCommand({ command: "cat; echo cat-exited-$?", ...options });',
        `writeFileSync(${JSON.stringify(`${dir}/result.json`)}, JSON.stringify({ empty, fed }));`,
        "process.exit(0);",
      ].join("\n"),
    );
    const child = spawnSync(process.execPath, ["--import", "tsx", script], {
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(child.stderr).toBe("");
    const { empty, fed } = JSON.parse(readFileSync(`${dir}/result.json`, "utf8"));
    expect(empty.output).toBe("cat-exited-0\n");
    expect(fed.exitCode).toBe(0);
    expect(fed.output).toBe("to-stdin\nto-stdout\n");
  });

  it("fails a command whose directory is gone, without starting it", async () => {
    const result = await runCommand({
      command: "touch started",
      cwd: `${dir}/gone`,
      env: ENV,
      timeoutMs: 10_000,
    });
    expect(result.exitCode).toBeNull();
    expect(result.output).toContain("could not start the command");
    expect(readdirSync(dir)).toEqual([]);
  });

  it("closes a process whose output nobody reads once it has exited, as Node's spawn does", async () => {
    // Node resumes the unread output of an exited child (flushStdio), so `close` still comes.
    const child = launch("/bin/sh", ["-c", "echo out; echo err >&2"], { env: ENV, cwd: dir });
    const closed = await new Promise<[number | null, string | null]>((resolve, reject) => {
      child.on("error", reject);
      child.on("close", (code, signal) => resolve([code, signal]));
    });
    expect(closed).toEqual([0, null]);
  });

  it("runs many commands at once and leaks no descriptor", async () => {
    const fds = () => readdirSync("/proc/self/fd").length;
    await run("true"); // opens what is opened once (/dev/null)
    const before = fds();
    const results = await Promise.all(
      Array.from({ length: 60 }, (_, i) => run(`echo ${i}; exit ${i % 7}`)),
    );
    results.forEach((result, i) => {
      expect(result.output).toBe(`${i}\n`);
      expect(result.exitCode).toBe(i % 7);
    });
    // Each command had four descriptors here (three pipe ends and a pidfd): a leak would show
    // as hundreds. A pidfd is closed with its handle, a loop turn later; the test runner holds
    // a few of its own that come and go.
    await new Promise((resolve) => setImmediate(resolve));
    expect(Math.abs(fds() - before)).toBeLessThan(5);
  });
});
