import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildCommandEnv, useLauncher } from "@looprun/core";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { runCommandAgent } from "../src/agents/command-agent";
import { COMMAND_ENV, isAlive, readPids, removeDir, runIn, tempDir, waitFor } from "./support";

let dir: string;
beforeEach(async () => {
  dir = await tempDir();
});
afterEach(async () => {
  await removeDir(dir);
});

/** A command that records its own pid and a background child's, then waits for the child. */
const WITH_BACKGROUND_CHILD = "echo $$ > pids; sleep 30 & echo $! >> pids; echo started; wait";

describe.each(["directly", "through the launcher", "through posix_spawn"])(
  "runCommand, spawned %s",
  (how) => {
    beforeAll(() => useLauncher(how !== "directly", { posixSpawn: how === "through posix_spawn" }));
    afterAll(() => useLauncher(false));

    it("captures stdout and stderr together, and the exit code", async () => {
      const result = await runIn(dir, "echo to-stdout; echo to-stderr >&2; exit 3");
      expect(result.exitCode).toBe(3);
      expect(result.signal).toBeNull();
      expect(result.timedOut).toBe(false);
      expect(result.aborted).toBe(false);
      expect(result.output).toContain("to-stdout\n");
      expect(result.output).toContain("to-stderr\n");
      expect(result.durationMs).toBeGreaterThanOrEqual(0);
    });

    it.runIf(how === "through posix_spawn")(
      "keeps stdout and stderr in the order the command wrote them (one pipe, as 2>&1)",
      async () => {
        const result = await runIn(
          dir,
          "i=0; while [ $i -lt 300 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done",
        );
        const lines = Array.from({ length: 300 }, (_, i) => `out${i}\nerr${i}\n`);
        expect(result.output).toBe(lines.join(""));
      },
    );

    it("runs in the given directory", async () => {
      const result = await runIn(dir, "pwd");
      expect(result.output.trim()).toBe(dir);
    });

    it("keeps the end of the output when it exceeds the cap, and says how much it dropped", async () => {
      const count = 20_000;
      let full = "";
      for (let i = 1; i <= count; i++) full += `${i}\n`;
      const result = await runIn(dir, `seq 1 ${count}`, { outputCapBytes: 200 });
      expect(result.exitCode).toBe(0);
      const match = /^\[… (\d+) bytes of earlier output omitted …\]\n([\s\S]*)$/.exec(
        result.output,
      );
      expect(match).not.toBeNull();
      const dropped = Number(match?.[1]);
      const kept = match?.[2] ?? "";
      expect(Buffer.byteLength(kept)).toBe(200);
      expect(dropped + 200).toBe(Buffer.byteLength(full));
      expect(full.endsWith(kept)).toBe(true);
      expect(kept.endsWith(`${count}\n`)).toBe(true);
    });

    it("does not mark output under the cap", async () => {
      const result = await runIn(dir, "printf 'exactly ten'", { outputCapBytes: 11 });
      expect(result.output).toBe("exactly ten");
    });

    it("on timeout kills the whole process group, background children included", async () => {
      // Long enough for `sh` to write the pids and say "started" on a loaded machine.
      const result = await runIn(dir, WITH_BACKGROUND_CHILD, { timeoutMs: 3000 });
      expect(result.timedOut).toBe(true);
      expect(result.aborted).toBe(false);
      expect(result.exitCode).toBeNull();
      expect(result.signal).toBe("SIGTERM");
      expect(result.output).toContain("started");
      expect(result.output).toContain("[looprun] killed after the timeout of 3000 ms");
      const pids = readPids(join(dir, "pids"));
      expect(pids).toHaveLength(2);
      for (const pid of pids) expect(isAlive(pid)).toBe(false);
    });

    it("escalates to SIGKILL when the group ignores SIGTERM", async () => {
      // Long enough for `sh` to set its trap before the SIGTERM on a loaded machine.
      const result = await runIn(dir, `trap '' TERM; ${WITH_BACKGROUND_CHILD}`, {
        timeoutMs: 2000,
        killGraceMs: 200,
      });
      expect(result.timedOut).toBe(true);
      expect(result.signal).toBe("SIGKILL");
      for (const pid of readPids(join(dir, "pids"))) expect(isAlive(pid)).toBe(false);
    });

    it("kills the whole group when the signal aborts", async () => {
      const controller = new AbortController();
      const spawned: number[] = [];
      const pending = runIn(dir, WITH_BACKGROUND_CHILD, {
        timeoutMs: 60_000,
        signal: controller.signal,
        onSpawn: (pid) => spawned.push(pid),
      });
      await waitFor(
        () => existsSync(join(dir, "pids")) && readPids(join(dir, "pids")).length === 2,
        "pids",
      );
      controller.abort();
      const result = await pending;
      expect(result.aborted).toBe(true);
      expect(result.timedOut).toBe(false);
      expect(result.exitCode).toBeNull();
      const pids = readPids(join(dir, "pids"));
      expect(spawned).toEqual([pids[0]]);
      for (const pid of pids) expect(isAlive(pid)).toBe(false);
    });

    it("does not run to completion when the signal is already aborted", async () => {
      const controller = new AbortController();
      controller.abort();
      const result = await runIn(dir, "sleep 30; touch finished", {
        timeoutMs: 60_000,
        signal: controller.signal,
      });
      expect(result.aborted).toBe(true);
      expect(result.exitCode).toBeNull();
      expect(existsSync(join(dir, "finished"))).toBe(false);
    });

    it("kills what a command left running in the background when it exits", async () => {
      const result = await runIn(dir, "sleep 30 & echo $! > pids; echo parent-done", {
        timeoutMs: 60_000,
      });
      expect(result.exitCode).toBe(0);
      expect(result.timedOut).toBe(false);
      expect(result.output).toContain("parent-done");
      for (const pid of readPids(join(dir, "pids"))) expect(isAlive(pid)).toBe(false);
    });

    it("also kills a background child that does not hold the output pipes", async () => {
      const result = await runIn(dir, "sleep 30 >/dev/null 2>&1 </dev/null & echo $! > pids", {
        timeoutMs: 60_000,
      });
      expect(result.exitCode).toBe(0);
      const [pid] = readPids(join(dir, "pids"));
      await waitFor(() => !isAlive(pid ?? 0), "the background child to die");
    });

    it("passes exactly the environment it is given", async () => {
      const result = await runIn(dir, "env", { env: { ...COMMAND_ENV, ONLY_THIS: "yes" } });
      const names = result.output
        .split("\n")
        .filter((l) => l.includes("="))
        .map((l) => l.slice(0, l.indexOf("=")));
      // The shell itself adds PWD (and may add SHLVL / OLDPWD); nothing comes from our process.
      const added = new Set(["PWD", "OLDPWD", "SHLVL", "_"]);
      expect(names.filter((n) => !added.has(n)).sort()).toEqual(["ONLY_THIS", "PATH"]);
      expect(result.output).toContain("ONLY_THIS=yes");
    });

    it("feeds stdin to the command", async () => {
      const result = await runIn(dir, "wc -c", { stdin: "x".repeat(100_000) });
      expect(result.output.trim()).toBe("100000");
    });

    it("does not fail when the command ignores a large stdin", async () => {
      const result = await runIn(dir, "echo ignored-stdin", { stdin: "y".repeat(4 * 1024 * 1024) });
      expect(result.exitCode).toBe(0);
      expect(result.output).toBe("ignored-stdin\n");
    });

    it("reads its stdin from a file when given one, which it cannot write through", async () => {
      const input = join(dir, "input.txt");
      writeFileSync(input, "from the file\n");
      const result = await runIn(
        dir,
        "cat; { echo overwritten >&0; } 2>/dev/null || echo read-only",
        { stdin: "not this", stdinFile: input },
      );
      expect(result.exitCode).toBe(0);
      expect(result.output).toBe("from the file\nread-only\n");
      expect(readFileSync(input, "utf8")).toBe("from the file\n");
    });

    it("does not start when its stdin file cannot be opened", async () => {
      const result = await runIn(dir, "echo ran > ran.txt", {
        stdinFile: join(dir, "missing.txt"),
      });
      expect(result.exitCode).toBeNull();
      expect(result.output).toMatch(/could not start the command: ENOENT.*missing\.txt/);
      expect(existsSync(join(dir, "ran.txt"))).toBe(false);
    });

    it("reports a command that cannot start instead of throwing, naming a missing directory as such", async () => {
      const missing = join(dir, "does-not-exist");
      const result = await runIn(missing, "true");
      expect(result.exitCode).toBeNull();
      // Not `spawn /bin/sh ENOENT`, as if the shell were missing.
      expect(result.output).toContain(
        `could not start the command: its working directory ${missing} does not exist`,
      );
    });
  },
);

describe("buildCommandEnv", () => {
  it("keeps only the base names, LC_*, LOOPRUN_* and the allowlist, then adds extra", () => {
    const env = buildCommandEnv(
      {
        PATH: "/bin",
        HOME: "/home/me",
        LANG: "C.UTF-8",
        LC_ALL: "C",
        TERM: "xterm",
        USER: "me",
        SHELL: "/bin/sh",
        TMPDIR: "/tmp",
        LOOPRUN_LOCK_MS: "100",
        API_TOKEN: "secret-token",
        MISTRAL_API_KEY: "secret-key",
        GITHUB_TOKEN: "gh",
        NPM_CONFIG_REGISTRY: "http://registry",
        UNSET: undefined,
      },
      ["NPM_CONFIG_REGISTRY"],
      { LOOPRUN_RUN_ID: "r1" },
    );
    expect(env).toEqual({
      PATH: "/bin",
      HOME: "/home/me",
      LANG: "C.UTF-8",
      LC_ALL: "C",
      TERM: "xterm",
      USER: "me",
      SHELL: "/bin/sh",
      TMPDIR: "/tmp",
      LOOPRUN_LOCK_MS: "100",
      NPM_CONFIG_REGISTRY: "http://registry",
      LOOPRUN_RUN_ID: "r1",
    });
  });

  it("passes secrets only when they are allowlisted", () => {
    const env = buildCommandEnv({ API_TOKEN: "t", MISTRAL_API_KEY: "k" }, ["MISTRAL_API_KEY"]);
    expect(env).not.toHaveProperty("API_TOKEN");
    expect(env.MISTRAL_API_KEY).toBe("k");
  });

  it("gives a default PATH", () => {
    expect(buildCommandEnv({}, []).PATH).toBe("/usr/local/bin:/usr/bin:/bin");
  });
});

describe("command agent", () => {
  it("gets the prompt on stdin and in $LOOPRUN_PROMPT_FILE, which is removed afterwards", async () => {
    const prompt = "# Task\n\nDo the thing.\n";
    const result = await runCommandAgent({
      spec: {
        type: "command",
        command: 'cat > stdin.txt; cp "$LOOPRUN_PROMPT_FILE" file.txt; echo "$LOOPRUN_PROMPT_FILE"',
        timeoutMs: 10_000,
      },
      prompt,
      workspace: dir,
      env: COMMAND_ENV,
      budgetMs: 10_000,
      outputCapBytes: 65_536,
      signal: new AbortController().signal,
    });
    expect(result.exitCode).toBe(0);
    expect(readFileSync(join(dir, "stdin.txt"), "utf8")).toBe(prompt);
    expect(readFileSync(join(dir, "file.txt"), "utf8")).toBe(prompt);
    const promptFile = result.output.trim();
    expect(promptFile.startsWith(dir)).toBe(false);
    expect(existsSync(promptFile)).toBe(false);
  });

  it("is cut short by the smaller of its own timeout and the budget's", async () => {
    const sleeper = (ownMs: number, budgetMs: number) =>
      runCommandAgent({
        spec: { type: "command", command: "sleep 30", timeoutMs: ownMs },
        prompt: "p",
        workspace: dir,
        env: COMMAND_ENV,
        budgetMs,
        outputCapBytes: 65_536,
        signal: new AbortController().signal,
      });
    const cut = await sleeper(600_000, 200);
    expect(cut.timedOut).toBe(true);
    expect(cut.output).toContain(
      "killed: the run's time budget (maxMinutes) ran out (after 200 ms)",
    );
    // Its own timeout, when the smaller, is told as its own.
    const own = await sleeper(200, 600_000);
    expect(own.output).toContain("[looprun] killed after the timeout of 200 ms");
  });
});
