import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, inject, it } from "vitest";
import {
  cliEnvFor,
  commandRun,
  getRun,
  runCli,
  submit,
  submittedId,
  useStack,
  waitForStatus,
} from "./support/stack";

const stack = useStack(() => ({ redisUrl: inject("redisUrl") }));
const cliEnv = () => cliEnvFor(stack.url);

describe("looprun CLI", () => {
  it("submit --watch prints progress and exits 0 when the run succeeds", async () => {
    const { code, output } = await runCli(
      [
        "submit",
        "--task",
        "say hello",
        "--agent",
        "echo hello > hello.txt",
        "--test",
        "grep -q hello hello.txt",
        "--session",
        "cli-ok",
        "--cooldown",
        "0",
        "--watch",
      ],
      cliEnv(),
    );
    expect(code, output).toBe(0);
    const { id, sessionId } = submittedId(output);
    expect(sessionId).toBe("cli-ok");
    expect(output).toContain("iteration 1 started");
    expect(output).toMatch(/agent exited 0 after \d+ ms/);
    expect(output).toContain("validation passed: grep -q hello hello.txt → 0");
    expect(output).toContain("finished: succeeded (success)");
    // One line per event, each with the elapsed time.
    expect(
      output.split("\n").filter((l) => /^\[\d\d:\d\d\] /.test(l)).length,
    ).toBeGreaterThanOrEqual(6);

    const run = await getRun(stack, id);
    expect(run).toMatchObject({ status: "succeeded", task: "say hello", sessionId: "cli-ok" });
    expect(existsSync(join(run.workspace, "hello.txt"))).toBe(true);
  });

  it("submit --watch exits 1 when the run fails", async () => {
    const { code, output } = await runCli(
      [
        "submit",
        "--task",
        "never passes",
        "--agent",
        "true",
        "--test",
        "exit 3",
        "--max-iterations",
        "2",
        "--cooldown",
        "0",
        "--watch",
      ],
      cliEnv(),
    );
    expect(code, output).toBe(1);
    const { id } = submittedId(output);
    expect(output).toContain("validation failed: exit 3 → 3");
    expect(output).toContain("iteration 2 started");
    expect(output).toContain("budget exhausted (max_iterations)");
    expect(output).toContain("finished: failed (max_iterations) — failed_budget_exhausted");
    expect(await getRun(stack, id)).toMatchObject({ status: "failed", reason: "max_iterations" });
  });

  it("submit --json --watch keeps stdout JSON lines: the created run, then the run as it ended; progress on stderr", async () => {
    const { code, output, stdout } = await runCli(
      [
        "submit",
        "--task",
        "json watch",
        "--agent",
        "true",
        "--test",
        "true",
        "--cooldown",
        "0",
        "--json",
        "--watch",
      ],
      cliEnv(),
    );
    expect(code, output).toBe(0);
    const lines = stdout.trim().split("\n");
    expect(lines, stdout).toHaveLength(2);
    const [created, ended] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(created).toMatchObject({ status: "queued" });
    expect(ended).toMatchObject({ id: created?.id, status: "succeeded", reason: "success" });
    // The progress went to stderr (output holds both streams).
    expect(output).toContain("finished: succeeded (success)");
  });

  it("submit reports a refused body and exits 1", async () => {
    const { code, output } = await runCli(
      ["submit", "--task", "t", "--agent", "true", "--test", "true", "--max-iterations", "0"],
      cliEnv(),
    );
    expect(code).toBe(1);
    // Once, under the flag's name (the API's field is no flag of the CLI).
    expect(output.trim()).toBe(
      "looprun: 400 invalid_request: --max-iterations: Too small: expected number to be >=1",
    );
  });

  it("submit without a gate names the flags that make one", async () => {
    const { code, output } = await runCli(["submit", "--task", "t", "--agent", "true"], cliEnv());
    expect(code).toBe(1);
    // Checked before asking the API, whose message names `review` too (no flag of the CLI).
    expect(output.trim()).toBe(
      "looprun: at least one gate is required: --test, --validate or --promise",
    );
    // With a gate, an empty one, the API's refusal names the flag.
    const empty = await runCli(
      ["submit", "--task", "t", "--agent", "true", "--test", ""],
      cliEnv(),
    );
    expect(empty.code).toBe(1);
    expect(empty.output).toMatch(/^looprun: 400 invalid_request: --test: /m);
  });

  it("refuses number flags that are not plain decimal numbers, naming the flag, before asking the API", async () => {
    const refused = async (args: string[], message: string) => {
      const { code, output } = await runCli(args, cliEnv());
      expect(code, output).toBe(1);
      expect(output.trim()).toBe(`looprun: ${message}`);
    };
    const submitWith = (...flags: string[]) => [
      "submit",
      ...["--task", "numbers", "--agent", "true", "--test", "true", "--session", "cli-numbers"],
      ...flags,
    ];
    await Promise.all([
      refused(submitWith("--cooldown", ""), '--cooldown must be a whole number, got ""'),
      refused(
        submitWith("--max-iterations", "0x3"),
        "--max-iterations must be a whole number, got 0x3",
      ),
      refused(
        submitWith("--max-iterations", "2.5"),
        "--max-iterations must be a whole number, got 2.5",
      ),
      refused(
        submitWith("--success-threshold", "1e-1"),
        "--success-threshold must be a decimal number such as 0.5, got 1e-1",
      ),
      refused(["ls", "-n", "abc"], "-n/--limit must be a whole number, got abc"),
    ]);
    const { body } = await stack.api("GET", "/api/runs?sessionId=cli-numbers");
    expect(body.items).toEqual([]);
  });

  it("sends a run id as one path segment", async () => {
    const { code, output } = await runCli(["show", "a/../b"], cliEnv());
    expect(code).toBe(1);
    expect(output.trim()).toBe("looprun: 404 not_found: run a/../b not found");
  });

  it("--help names LOOPRUN_URL and API_TOKEN", async () => {
    const { code, stdout } = await runCli(["--help"], cliEnv());
    expect(code).toBe(0);
    expect(stdout).toContain("LOOPRUN_URL  the API's address (default http://127.0.0.1:8787)");
    expect(stdout).toContain("API_TOKEN    the API's token");
  });

  describe("with a finished run", () => {
    let id: string;

    beforeAll(async () => {
      ({ id } = await submit(
        stack,
        commandRun("true", { task: "listed by ls", sessionId: "cli-ls", testCommand: "true" }),
      ));
      await waitForStatus(stack, id);
    });

    it("ls lists runs, newest first, one line each", async () => {
      const ls = await runCli(["ls"], cliEnv());
      expect(ls.code, ls.output).toBe(0);
      const line = ls.stdout.split("\n").find((l) => l.startsWith(id));
      expect(line, ls.output).toBeDefined();
      expect(line).toMatch(/succeeded/);
      expect(line).toContain("cli-ls");
      expect(line).toContain("listed by ls");
    });

    it("ls keeps a task with line breaks and escape sequences on its line, as text", async () => {
      const { id: odd } = await submit(
        stack,
        commandRun("true", {
          task: "first line\nsecond\x1b[31m red\x1b]0;title\x07",
          sessionId: "cli-ls-odd",
          testCommand: "true",
        }),
      );
      const ls = await runCli(["ls", "--session", "cli-ls-odd"], cliEnv());
      expect(ls.code, ls.output).toBe(0);
      expect(ls.stdout).not.toContain("\x1b");
      expect(ls.stdout.trim().split("\n")).toEqual([
        expect.stringMatching(new RegExp(`^${odd} .* first line second\\[31m red\\]0;title$`)),
      ]);
    });

    it("ls says so on stderr when no run matches, and prints no line", async () => {
      const none = await runCli(["ls", "--session", "cli-ls-nobody"], cliEnv());
      expect(none.code, none.output).toBe(0);
      expect(none.stdout).toBe("");
      expect(none.output.trim()).toBe("no runs match");
      // A cursor past the oldest run: an empty page says so too.
      const past = await runCli(["ls", "--cursor", "00000000000000000000000000"], cliEnv());
      expect(past.code, past.output).toBe(0);
      expect(past.stdout).toBe("");
      expect(past.output.trim()).toBe("no more runs");
    });

    it("ls filters by session and pages with --limit", async () => {
      const bySession = await runCli(["ls", "--session", "cli-ls"], cliEnv());
      expect(bySession.code, bySession.output).toBe(0);
      expect(bySession.stdout.trim().split("\n")).toEqual([
        expect.stringMatching(new RegExp(`^${id} `)),
      ]);
      const paged = await runCli(["ls", "--limit", "1"], cliEnv());
      expect(paged.code, paged.output).toBe(0);
      expect(paged.stdout).toMatch(/more: looprun ls -n 1 --cursor [0-9A-Z]{26}/);
    });

    it("ls's next page keeps the filters and the page size", async () => {
      const { id: other } = await submit(
        stack,
        commandRun("true", { task: "second of cli-ls", sessionId: "cli-ls", testCommand: "true" }),
      );
      await waitForStatus(stack, other);
      const first = await runCli(
        ["ls", "--session", "cli-ls", "--status", "succeeded", "-n", "1"],
        cliEnv(),
      );
      expect(first.code, first.output).toBe(0);
      const more =
        /^more: looprun (ls --session cli-ls --status succeeded -n 1 --cursor \S+)$/m.exec(
          first.stdout,
        )?.[1];
      expect(more, first.stdout).toBeDefined();
      const next = await runCli(String(more).split(" "), cliEnv());
      expect(next.code, next.output).toBe(0);
      expect(next.stdout.trim().split("\n")).toEqual([
        expect.stringMatching(new RegExp(`^${id} `)),
      ]);
    });

    it("show prints the run and its iterations as JSON", async () => {
      const show = await runCli(["show", id], cliEnv());
      expect(show.code, show.output).toBe(0);
      expect(JSON.parse(show.stdout)).toMatchObject({
        id,
        status: "succeeded",
        iterations: [{ n: 1, outcome: "complete" }],
      });
    });

    it("watch follows the run to its end", async () => {
      const watch = await runCli(["watch", id], cliEnv());
      expect(watch.code, watch.output).toBe(0);
      expect(watch.stdout).toContain("finished: succeeded (success)");
    });
  });

  it("stop stops a running run; a second stop says stopped again; a succeeded run cannot be stopped", async () => {
    const { id } = await submit(stack, commandRun("sleep 300", { testCommand: "true" }));
    await waitForStatus(stack, id, ["running"]);

    const stop = await runCli(["stop", id], cliEnv());
    expect(stop.code, stop.output).toBe(0);
    expect(stop.output).toMatch(new RegExp(`run ${id}: (stopping|stopped)`));
    expect(await waitForStatus(stack, id, ["stopped"], { timeoutMs: 15_000 })).toMatchObject({
      reason: "stopped",
    });

    const again = await runCli(["stop", id], cliEnv());
    expect(again.code, again.output).toBe(0);
    expect(again.output).toContain(`run ${id}: stopped`);

    const done = await submit(stack, commandRun("true", { testCommand: "true" }));
    expect(await waitForStatus(stack, done.id)).toMatchObject({ status: "succeeded" });
    const late = await runCli(["stop", done.id], cliEnv());
    expect(late.code).toBe(1);
    expect(late.output).toContain("409 run_finished");
  });

  it("refuses an empty run id before asking the API", async () => {
    for (const args of [
      ["show", ""],
      ["stop", " "],
      ["watch", ""],
    ]) {
      const { code, output } = await runCli(args, cliEnv());
      expect(code, output).toBe(1);
      expect(output).toContain("looprun: the run id is empty");
      expect(output).not.toContain("no route");
    }
  });

  it("prints its version", async () => {
    const { version } = JSON.parse(
      readFileSync(new URL("../apps/cli/package.json", import.meta.url), "utf8"),
    ) as { version: string };
    for (const flag of ["--version", "-V"]) {
      const { code, output } = await runCli([flag], cliEnv());
      expect(code, output).toBe(0);
      expect(output.trim()).toBe(version);
    }
  });
});
