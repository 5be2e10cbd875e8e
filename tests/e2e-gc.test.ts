import { execFileSync } from "node:child_process";
import { statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, inject, it } from "vitest";
import { commandRun, runCli, submit, useStack, waitForStatus } from "./support/stack";

// `looprun gc` from outside, on a stack's real store: refused while a worker runs; with the
// workers stopped it deletes the refs of a run the database no longer has (as a worker killed
// between retention's two steps leaves them) and the objects only that run reached, and what the
// kept runs need still serves their patch, a rollback and a next run.

const stack = useStack(() => ({ redisUrl: inject("redisUrl") }));

const snapshotsDir = () => join(stack.dir, "snapshots");
const git = (sessionId: string, ...args: string[]) =>
  execFileSync("git", [`--git-dir=${join(snapshotsDir(), `${sessionId}.git`)}`, ...args], {
    encoding: "utf8",
  }).trim();
const exists = (sessionId: string, id: string) => {
  try {
    git(sessionId, "cat-file", "-e", id);
    return true;
  } catch {
    return false;
  }
};
const blob = (text: string) =>
  execFileSync("git", ["hash-object", "--stdin"], { input: text, encoding: "utf8" }).trim();

describe("looprun gc", () => {
  it("is refused beside a worker; then removes only what no run of the database needs", async () => {
    const gone = await submit(
      stack,
      commandRun("echo 'only the gone run wrote this' > gone.txt", {
        sessionId: "gc-gone",
        testCommand: "true",
        maxIterations: 1,
      }),
    );
    const kept = await submit(
      stack,
      commandRun("echo kept >> kept.txt", {
        sessionId: "gc-kept",
        testCommand: "[ $(wc -l < kept.txt) -ge 2 ]",
        cooldownMs: 0,
      }),
    );
    for (const run of [gone, kept]) {
      expect(await waitForStatus(stack, run.id), stack.logs()).toMatchObject({
        status: "succeeded",
      });
    }
    const goneHead = git("gc-gone", "rev-parse", `refs/looprun/${gone.id}`);
    const keptHead = git("gc-kept", "rev-parse", `refs/looprun/${kept.id}`);
    const goneBlob = blob("only the gone run wrote this\n");
    expect(exists("gc-gone", goneBlob)).toBe(true);

    // The gone run's rows are deleted as retention deletes them; its refs stay (a worker killed
    // before its second step).
    const db = new Database(stack.databasePath);
    db.pragma("foreign_keys = ON");
    db.prepare("DELETE FROM runs WHERE id = ?").run(gone.id);
    db.close();
    expect((await stack.api("GET", `/api/runs/${gone.id}`)).status).toBe(404);

    // A worker may write: refused, nothing removed.
    const refused = await runCli(["gc"], stack.env);
    expect(refused.code, refused.output).toBe(1);
    expect(refused.output).toContain("gc refused");
    expect(refused.output).toMatch(/pid \d+ on .*worker/);
    expect(refused.output).toContain("Stop the API and the workers first");
    expect(exists("gc-gone", goneHead)).toBe(true);

    await stack.stopWorkers();
    // Another SQLite file for the database: refused, and left as it was (no tables made in it).
    const other = join(stack.dir, "other.db");
    writeFileSync(other, "");
    const wrong = await runCli(["gc"], { ...stack.env, DATABASE_PATH: other });
    expect(wrong.code, wrong.output).toBe(1);
    expect(wrong.output).toContain(`${other} (DATABASE_PATH) is not a looprun database`);
    expect(statSync(other).size).toBe(0);
    const dry = await runCli(["gc", "--dry-run"], stack.env);
    expect(dry.code, dry.output).toBe(0);
    expect(dry.stdout).toContain("dry run: nothing removed");
    expect(dry.stdout).toContain("refs of runs no longer in the database: 1 to delete");
    const toRemove = Number(/loose objects: +(\d+) to remove/.exec(dry.stdout)?.[1]);
    expect(toRemove).toBeGreaterThanOrEqual(3); // the commit, its tree and gone.txt at least
    expect(exists("gc-gone", goneHead)).toBe(true);

    const real = await runCli(["gc"], stack.env);
    expect(real.code, real.output).toBe(0);
    expect(real.stdout).toContain("sessions read:   2");
    expect(real.stdout).toContain("refs of runs no longer in the database: 1 deleted");
    expect(real.stdout).toContain(`loose objects:   ${toRemove} removed`);
    expect(git("gc-gone", "for-each-ref")).toBe("");
    expect(exists("gc-gone", goneHead)).toBe(false);
    expect(exists("gc-gone", goneBlob)).toBe(false);
    // The kept run's snapshots are whole (rev-list fails on a missing object).
    git("gc-kept", "rev-list", "--objects", keptHead);

    // Nothing left to collect.
    const again = await runCli(["gc"], stack.env);
    expect(again.stdout).toContain("loose objects:   0 removed");

    // The kept run's patch, a rollback of it, and a next run of its session work as before.
    const patch = await stack.api("GET", `/api/runs/${kept.id}/patch`);
    expect(patch.status).toBe(200);
    expect(String(patch.body)).toContain("+kept");
    const rollback = await stack.api("POST", `/api/runs/${kept.id}/rollback`, { iteration: 1 });
    expect(rollback.status, JSON.stringify(rollback.body)).toBe(200);
    stack.startWorker();
    const next = await submit(
      stack,
      commandRun("echo next >> kept.txt", {
        sessionId: "gc-kept",
        testCommand: "grep -q next kept.txt",
      }),
    );
    expect(await waitForStatus(stack, next.id), stack.logs()).toMatchObject({
      status: "succeeded",
    });
    const nextPatch = await stack.api("GET", `/api/runs/${next.id}/patch`);
    expect(String(nextPatch.body)).toContain("+next");
  }, 90_000);
});
