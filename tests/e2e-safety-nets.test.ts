import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join, relative } from "node:path";
import { RUN_QUEUE } from "@looprun/core";
import Database from "better-sqlite3";
import { Queue } from "bullmq";
import { describe, expect, inject, it } from "vitest";
import {
  cliEnvFor,
  commandRun,
  getEvents,
  getIterations,
  getRun,
  runCli,
  submit,
  useStack,
  waitFor,
  waitForStatus,
} from "./support/stack";

const stack = useStack(() => ({ redisUrl: inject("redisUrl") }));

const cliEnv = () => cliEnvFor(stack.url);

/** The id of the run that `looprun submit --json` created (its first line). */
const createdId = (stdout: string): string => JSON.parse(stdout.split("\n")[0] ?? "").id;

/** Every file under `dir` (relative path → contents), `.git` aside. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      if (name === ".git") continue;
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else out[relative(dir, path)] = readFileSync(path, "utf8");
    }
  };
  walk(dir);
  return out;
}

/** Iteration 1 edits a.txt, deletes b.txt, creates new/c.txt; iteration 2 makes the test pass. */
const AGENT = [
  'if [ "$LOOPRUN_ITERATION" = 1 ]; then',
  "  echo A1 > a.txt; rm b.txt; mkdir -p new; echo C > new/c.txt",
  "else",
  "  echo A2 > a.txt; touch done",
  "fi",
].join("\n");

function seedWorkspace(name: string): string {
  const ws = join(stack.workspacesRoot, name);
  mkdirSync(ws);
  writeFileSync(join(ws, "a.txt"), "A0\n");
  writeFileSync(join(ws, "b.txt"), "B0\n");
  return ws;
}

describe("rollback through the API and a worker", () => {
  it("prints the paths a rollback changed without their control characters (CLI)", async () => {
    // A file the agent named with a terminal escape (it would retitle the terminal).
    const agent = `printf x > "$(printf 'evil\\033]0;pwned\\007.txt')"`;
    const run = await submit(
      stack,
      commandRun(agent, { sessionId: "rollback-escapes", testCommand: "true" }),
    );
    expect((await waitForStatus(stack, run.id)).status).toBe("succeeded");
    const cli = await runCli(["rollback", run.id, "--iteration", "0"], cliEnv());
    expect(cli.code, cli.output).toBe(0);
    expect(cli.stdout).toContain("removed  evil]0;pwned.txt");
    for (const control of ["\u001b", "\u0007"]) expect(cli.stdout).not.toContain(control);
  });

  it("restores iteration n and the baseline exactly, and is refused while the session is busy", async () => {
    const ws = seedWorkspace("rollback");
    const sessionId = "rollback-session";
    const before = tree(ws);
    const run = await submit(
      stack,
      commandRun(AGENT, { sessionId, workspace: "rollback", testCommand: "test -f done" }),
    );
    expect((await waitForStatus(stack, run.id)).status).toBe("succeeded");
    expect(tree(ws)).toEqual({ "a.txt": "A2\n", "new/c.txt": "C\n", done: "" });

    const to1 = await stack.api("POST", `/api/runs/${run.id}/rollback`, { iteration: 1 });
    expect(to1.status).toBe(200);
    expect(tree(ws)).toEqual({ "a.txt": "A1\n", "new/c.txt": "C\n" });
    expect(to1.body).toMatchObject({ id: run.id, iteration: 1 });
    expect(to1.body.files).toEqual(
      expect.arrayContaining([
        { path: "a.txt", change: "restored" },
        { path: "done", change: "removed" },
      ]),
    );

    // The CLI does the same (here: back to before the run).
    const cli = await runCli(["rollback", run.id, "--iteration", "0"], cliEnv());
    expect(cli.code, cli.output).toBe(0);
    expect(cli.stdout).toContain("workspace restored as before the run");
    expect(cli.stdout).toContain("restored b.txt");
    expect(cli.stdout).toContain("removed  new/c.txt");
    expect(tree(ws)).toEqual(before);
    expect(existsSync(join(ws, "new"))).toBe(false);

    const rollbacks = (await getEvents(stack, run.id)).filter((e) => e.type === "rollback_applied");
    expect(rollbacks.map((e) => e.data.iteration)).toEqual([1, 0]);
    expect(rollbacks[1]?.data.files).toEqual(
      expect.arrayContaining([
        { path: "b.txt", change: "restored" },
        { path: "new/c.txt", change: "removed" },
      ]),
    );

    expect((await stack.api("POST", `/api/runs/${run.id}/rollback`, { iteration: 7 })).status).toBe(
      404,
    );
    expect(
      (await stack.api("POST", "/api/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/rollback", { iteration: 0 }))
        .status,
    ).toBe(404);
    const bad = await stack.api("POST", `/api/runs/${run.id}/rollback`, { iteration: -1 });
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues[0].path).toBe("iteration");

    // A second run of the session holds it: rolling back the first is refused.
    const gate = join(stack.dir, "release-rollback");
    const busy = await submit(
      stack,
      commandRun(`while [ ! -f ${gate} ]; do sleep 0.05; done; touch done`, {
        sessionId,
        testCommand: "test -f done",
      }),
    );
    await waitForStatus(stack, busy.id, ["running"]);
    const before409 = tree(ws);
    const refused = await stack.api("POST", `/api/runs/${run.id}/rollback`, { iteration: 1 });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: "session_busy", activeRunId: busy.id });
    const cliRefused = await runCli(["rollback", run.id, "--iteration", "1"], cliEnv());
    expect(cliRefused.code, cliRefused.output).toBe(1);
    expect(cliRefused.output).toContain("session_busy");
    expect(tree(ws)).toEqual(before409);
    expect(
      (await getEvents(stack, run.id)).filter((e) => e.type === "rollback_applied"),
    ).toHaveLength(2);
    writeFileSync(gate, "");
    expect((await waitForStatus(stack, busy.id)).status).toBe("succeeded");
    // The command agent's prompt is told only real patterns: the first run's check failing
    // once before it passed is not one (learning.test.ts).
    const [learned] = await getIterations(stack, busy.id);
    expect(learned?.prompt).toContain("`test -f done` must exit 0");
    expect(learned?.prompt).not.toContain("# Learned from earlier runs");
    expect(learned?.prompt).not.toContain("command `test -f done`");
  });

  it("is refused while another session's run works in the same workspace", async () => {
    const ws = seedWorkspace("shared-ws");
    const first = await submit(
      stack,
      commandRun("echo changed > a.txt", {
        sessionId: "shared-a",
        workspace: "shared-ws",
        testCommand: "true",
      }),
    );
    expect((await waitForStatus(stack, first.id)).status).toBe("succeeded");
    const gate = join(stack.dir, "release-shared");
    const other = await submit(
      stack,
      commandRun(`while [ ! -f ${gate} ]; do sleep 0.05; done`, {
        sessionId: "shared-b",
        workspace: "shared-ws",
        testCommand: "true",
      }),
    );
    await waitForStatus(stack, other.id, ["running"]);
    const before = tree(ws);
    const refused = await stack.api("POST", `/api/runs/${first.id}/rollback`, { iteration: 0 });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: "session_busy", activeRunId: other.id });
    expect(tree(ws)).toEqual(before);
    writeFileSync(gate, "");
    expect((await waitForStatus(stack, other.id)).status).toBe("succeeded");
    const restored = await stack.api("POST", `/api/runs/${first.id}/rollback`, { iteration: 0 });
    expect(restored.status, JSON.stringify(restored.body)).toBe(200);
    expect(readFileSync(join(ws, "a.txt"), "utf8")).toBe("A0\n");
  });

  it.each([
    ["its workspace", "held-ws", "held"],
    // A rollback of another of the session's workspaces: it holds the session's snapshot store.
    ["its session", "held-other-ws", "held-session"],
  ])(
    "starts a run submitted while a rollback holds %s only once the hold is gone",
    async (_what, name, sessionId) => {
      const ws = seedWorkspace(name);
      // A rollback in progress, as the API records it (its restore may take a while).
      const db = new Database(stack.databasePath);
      const queue = new Queue(RUN_QUEUE, {
        connection: { url: inject("redisUrl") },
        prefix: stack.prefix,
      });
      try {
        db.prepare(
          "insert into workspace_holds (workspace, run_id, expires_at) values (?, ?, ?)",
        ).run(
          sessionId === "held" ? realpathSync(ws) : `session:${sessionId}`,
          "01ROLLBACKINPROGRESS00000",
          Date.now() + 60_000,
        );
        const run = await submit(
          stack,
          commandRun("touch ran", { sessionId, workspace: name, testCommand: "true" }),
        );
        // The worker took the job three times and put it back each time, the run untouched.
        await waitFor(async () => ((await queue.getJob(run.id))?.attemptsStarted ?? 0) >= 3);
        const waiting = await getRun(stack, run.id);
        expect(waiting.progress).toBe("waiting: a rollback is restoring the workspace");
        expect(waiting.status).toBe("queued");
        expect(waiting.startedAt).toBeNull();
        expect(existsSync(join(ws, "ran"))).toBe(false);
        expect((await getEvents(stack, run.id)).map((e) => e.type)).toEqual(["run_queued"]);

        db.prepare("delete from workspace_holds").run();
        expect((await waitForStatus(stack, run.id)).status).toBe("succeeded");
        expect(existsSync(join(ws, "ran"))).toBe(true);
      } finally {
        db.close();
        await queue.close();
      }
    },
  );

  it("rollbackOnFailure leaves the workspace as before the run; the patch stays downloadable", async () => {
    const ws = seedWorkspace("rollback-on-failure");
    const before = tree(ws);
    const run = await submit(
      stack,
      commandRun(AGENT, {
        workspace: "rollback-on-failure",
        testCommand: "false",
        maxIterations: 2,
        rollbackOnFailure: true,
      }),
    );
    const final = await waitForStatus(stack, run.id);
    expect(final).toMatchObject({ status: "failed", reason: "max_iterations" });
    expect(tree(ws)).toEqual(before);
    const patch = await stack.api("GET", `/api/runs/${run.id}/patch`);
    expect(patch.status).toBe(200);
    expect(patch.body).toContain("new/c.txt");
    expect(patch.body).toContain("+A2");
    const events = await getEvents(stack, run.id);
    expect(events.find((e) => e.type === "rollback_applied")?.data).toMatchObject({
      iteration: 0,
      onFailure: true,
    });
  });
});

describe("partial success and stall detection through the API", () => {
  it("reports partial success with the failed gate named", async () => {
    const run = await submit(
      stack,
      commandRun("true", {
        testCommand: "true",
        validationCommands: ["exit 4"],
        successThreshold: 0.5,
      }),
    );
    const final = await waitForStatus(stack, run.id);
    expect(final).toMatchObject({
      status: "succeeded",
      partial: true,
      gates: { passed: 1, total: 2, failed: ["exit 4"] },
    });
    expect(final.summary).toContain("1 of 2 gates passed (failed: exit 4)");
  });

  it("ends a run that makes no progress as stalled, before its iterations run out", async () => {
    const run = await submit(
      stack,
      commandRun("true", { testCommand: "exit 1", maxIterations: 10 }),
    );
    const final = await waitForStatus(stack, run.id);
    expect(final).toMatchObject({ status: "failed", reason: "stalled", iteration: 4 });
    await waitFor(async () => (await getEvents(stack, run.id)).at(-1)?.type === "run_finished");
  });

  it("ends by budget when the budget's last iteration would also stall the run", async () => {
    const run = await submit(
      stack,
      commandRun("true", { testCommand: "exit 1", maxIterations: 4 }),
    );
    const final = await waitForStatus(stack, run.id);
    expect(final).toMatchObject({
      status: "failed",
      reason: "max_iterations",
      summary: "failed_budget_exhausted",
      iteration: 4,
    });
    await waitFor(async () => (await getEvents(stack, run.id)).at(-1)?.type === "run_finished");
    const types = (await getEvents(stack, run.id)).map((e) => e.type);
    expect(types.slice(-2)).toEqual(["budget_exhausted", "run_finished"]);
  });

  it("takes the settings from the CLI: maxStalledIterations, successThreshold, rollbackOnFailure", async () => {
    const submitCli = (args: string[]) =>
      runCli(
        ["submit", "--task", "e2e task", "--cooldown", "0", "--json", "--watch", ...args],
        cliEnv(),
      );

    // One iteration without progress is enough with --max-stalled 1: iteration 2 ends it.
    const stalled = await submitCli([
      "--agent",
      "true",
      "--test",
      "exit 1",
      "--max-iterations",
      "10",
      "--max-stalled",
      "1",
    ]);
    expect(stalled.code, stalled.output).toBe(1);
    const stalledRun = await getRun(stack, createdId(stalled.stdout));
    expect(stalledRun).toMatchObject({
      status: "failed",
      reason: "stalled",
      iteration: 2,
      maxStalledIterations: 1,
    });
    expect(stalledRun.summary).toContain("stalled: 1 iteration in a row changed nothing");

    const partial = await submitCli([
      "--agent",
      "true",
      "--test",
      "true",
      "--validate",
      "exit 4",
      "--validate",
      "exit 5",
      "--validate",
      "true",
      "--success-threshold",
      "0.5",
    ]);
    expect(partial.code, partial.output).toBe(0);
    const partialRun = await getRun(stack, createdId(partial.stdout));
    expect(partialRun).toMatchObject({
      status: "succeeded",
      partial: true,
      successThreshold: 0.5,
      gates: { passed: 2, total: 4, failed: ["exit 4", "exit 5"] },
    });
    expect(partialRun.summary).toContain("partial: 2 of 4 gates passed (failed: exit 4, exit 5)");

    const ws = seedWorkspace("cli-rollback-on-failure");
    const before = tree(ws);
    const failed = await submitCli([
      "--agent",
      "echo changed > a.txt; echo new > new.txt",
      "--test",
      "false",
      "--max-iterations",
      "1",
      "--workspace",
      "cli-rollback-on-failure",
      "--rollback-on-failure",
    ]);
    expect(failed.code, failed.output).toBe(1);
    expect(await getRun(stack, createdId(failed.stdout))).toMatchObject({
      status: "failed",
      rollbackOnFailure: true,
    });
    expect(tree(ws)).toEqual(before);

    const bad = await submitCli(["--agent", "true", "--test", "true", "--max-stalled", "0"]);
    expect(bad.code).toBe(1);
    expect(bad.output).toContain("--max-stalled: Too small");
  });
});
