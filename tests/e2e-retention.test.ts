import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, inject, it } from "vitest";
import { commandRun, submit, useStack, waitFor, waitForStatus } from "./support/stack";

// Retention from outside: a worker with LOOPRUN_RETENTION_DAYS deletes the runs that finished
// longer ago (here 10 s) — the API no longer knows them, their snapshot refs are gone — and
// leaves active runs, however old, and the session, whose next run works as before.

// Long enough for the test to read a finished run (status, patch, refs) on a loaded machine
// before it goes.
const RETENTION_MS = 10_000;
const stack = useStack(() => ({
  redisUrl: inject("redisUrl"),
  env: {
    LOOPRUN_RETENTION_DAYS: String(RETENTION_MS / 86_400_000),
    LOOPRUN_RETENTION_CHECK_MS: "200",
  },
}));

const unique = (name: string) => `${name}-${randomBytes(4).toString("hex")}`;

/** The snapshot refs of a session, as git lists them. */
function refs(sessionId: string): string[] {
  const gitDir = join(stack.dir, "snapshots", `${sessionId}.git`);
  return execFileSync("git", [`--git-dir=${gitDir}`, "for-each-ref", "--format=%(refname)"], {
    encoding: "utf8",
  })
    .split("\n")
    .filter(Boolean);
}

describe("retention (LOOPRUN_RETENTION_DAYS)", () => {
  it("deletes the runs past the retention with their snapshot refs; active runs and sessions stay", async () => {
    const sessionId = unique("kept-session");
    const old = await submit(
      stack,
      commandRun("echo one >> notes.txt", { sessionId, testCommand: "true" }),
    );
    expect(await waitForStatus(stack, old.id)).toMatchObject({ status: "succeeded" });
    expect((await stack.api("GET", `/api/runs/${old.id}/patch`)).status).toBe(200);
    expect(refs(sessionId)).toContain(`refs/looprun/${old.id}`);

    // An active run is kept however long it lasts.
    const longSession = unique("long");
    const long = await submit(
      stack,
      commandRun("while [ ! -f release ]; do sleep 0.1; done", {
        sessionId: longSession,
        testCommand: "true",
      }),
    );
    const running = await waitForStatus(stack, long.id, ["running"]);

    await waitFor(async () => (await stack.api("GET", `/api/runs/${old.id}`)).status === 404, {
      timeoutMs: 30_000,
    });
    for (const path of ["events", "iterations", "tool-calls", "reviews", "patch"]) {
      expect((await stack.api("GET", `/api/runs/${old.id}/${path}`)).status).toBe(404);
    }
    const list = await stack.api("GET", `/api/runs?sessionId=${sessionId}`);
    expect(list.body.items).toEqual([]);
    // The rows go first, the refs after (a worker dying in between leaves refs, never a run
    // without its snapshots): the refs are gone a moment after the API stops knowing the run.
    await waitFor(() => !refs(sessionId).includes(`refs/looprun/${old.id}`), { timeoutMs: 10_000 });
    // The session stays, without the run.
    const session = await stack.api("GET", `/api/sessions/${sessionId}`);
    expect(session.status).toBe(200);
    expect(session.body).toMatchObject({ activeRunId: null, runs: [] });

    // Older than the retention by now, and still running.
    await new Promise((resolve) => setTimeout(resolve, RETENTION_MS + 500));
    expect((await stack.api("GET", `/api/runs/${long.id}`)).body.status).toBe("running");

    // The session's next run works in the same workspace, its snapshots and patch too.
    const next = await submit(
      stack,
      commandRun("echo two >> notes.txt", { sessionId, testCommand: "grep -q two notes.txt" }),
    );
    const done = await waitForStatus(stack, next.id);
    expect(done).toMatchObject({ status: "succeeded" });
    const patch = await stack.api("GET", `/api/runs/${next.id}/patch`);
    expect(patch.status).toBe(200);
    expect(String(patch.body)).toContain("+two");

    writeFileSync(join(running.workspace, "release"), "");
    expect(await waitForStatus(stack, long.id)).toMatchObject({ status: "succeeded" });
    // Finished, it goes in its turn.
    await waitFor(async () => (await stack.api("GET", `/api/runs/${long.id}`)).status === 404, {
      timeoutMs: 30_000,
    });
    await waitFor(() => refs(longSession).length === 0, { timeoutMs: 10_000 });
    // The workspaces are the user's: they stay.
    expect(existsSync(join(running.workspace, "release"))).toBe(true);
  }, 120_000); // two runs wait out the retention: ~35 s alone
});
