import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WorkspaceSnapshots } from "@looprun/core";
import type { Database } from "@looprun/db";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { useApiHarness, VALID_RUN } from "./api-harness";

// `POST /api/runs/:id/rollback` of a run whose workspace directory is gone: a 409 naming it
// (nothing is restored into a directory made for it), and the restore once it is there again.

let snapshotsDir: string;
beforeEach(() => {
  snapshotsDir = mkdtempSync(join(tmpdir(), "looprun-rollback-api-"));
});
const h = useApiHarness("sqlite", () => ({ snapshotsDir }), { each: true });
afterEach(() => {
  rmSync(snapshotsDir, { recursive: true, force: true });
});

/** A finished run whose baseline holds `kept.txt`, as a worker leaves it. */
async function finishedRun(body: Record<string, unknown> = {}) {
  const submitted = await h.request("POST", "/api/runs", { ...VALID_RUN, ...body });
  expect(submitted.status).toBe(202);
  const run = (await h.repo.getRun(submitted.body.id))!;
  mkdirSync(run.workspace, { recursive: true });
  writeFileSync(join(run.workspace, "kept.txt"), "before the run\n");
  const snapshots = new WorkspaceSnapshots({ root: snapshotsDir });
  const target = { sessionId: run.sessionId, runId: run.id, workspace: run.workspace };
  const baseline = await snapshots.take(target, "baseline", null);
  snapshots.close();
  const claimed = await h.store.claimRun(run.id);
  const now = Date.now();
  await h.store.commit(
    run.id,
    claimed!.run.epoch,
    {
      run: {
        status: "failed",
        reason: "max_iterations",
        finishedAt: now,
        baselineSnapshot: baseline,
      },
    },
    now,
  );
  return run;
}

describe("rollback of a run whose workspace is gone", () => {
  it("answers 409 workspace_missing naming it, then restores once the directory is back", async () => {
    const run = await finishedRun();
    rmSync(run.workspace, { recursive: true });

    for (let i = 0; i < 2; i++) {
      // Twice: the first refusal released its hold (no session_busy).
      const refused = await h.request("POST", `/api/runs/${run.id}/rollback`, { iteration: 0 });
      expect(refused.status).toBe(409);
      expect(refused.body.error).toMatchObject({
        code: "workspace_missing",
        workspace: run.workspace,
      });
      expect(refused.body.error.message).toContain(run.workspace);
    }
    const events = await h.repo.listEvents(run.id, 0, 1000);
    expect(events.filter((e) => e.type === "rollback_applied")).toEqual([]);

    mkdirSync(run.workspace);
    const restored = await h.request("POST", `/api/runs/${run.id}/rollback`, { iteration: 0 });
    expect(restored.status).toBe(200);
    expect(restored.body.files).toEqual([{ path: "kept.txt", change: "restored" }]);
    expect(readFileSync(join(run.workspace, "kept.txt"), "utf8")).toBe("before the run\n");
  });

  it("answers 409 workspace_missing when a directory on its path is a file now", async () => {
    const run = await finishedRun({ workspace: "nested/ws" });
    const parent = join(run.workspace, "..");
    rmSync(parent, { recursive: true });
    writeFileSync(parent, "a file where the directory was\n");
    const refused = await h.request("POST", `/api/runs/${run.id}/rollback`, { iteration: 0 });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: "workspace_missing" });
    rmSync(parent);
  });

  it("answers 409 workspace_missing, emptying nothing, when the workspace is a symlink out now", async () => {
    const run = await finishedRun();
    const outside = mkdtempSync(join(tmpdir(), "looprun-outside-"));
    try {
      writeFileSync(join(outside, "other.txt"), "not the run's\n");
      renameSync(run.workspace, `${run.workspace}-real`);
      symlinkSync(outside, run.workspace);
      const refused = await h.request("POST", `/api/runs/${run.id}/rollback`, { iteration: 0 });
      expect(refused.status).toBe(409);
      expect(refused.body.error).toMatchObject({ code: "workspace_missing" });
      expect(refused.body.error.message).toContain("a symlink was put in its path");
      expect(readdirSync(outside)).toEqual(["other.txt"]);
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it("answers 409 workspace_missing, touching nothing, for a run of an older looprun whose workspace is WORKSPACES_ROOT", async () => {
    const run = await finishedRun();
    // As a version that took `"workspace": "."` stored it: the root itself.
    const root = realpathSync(h.workspacesRoot);
    (h.storage.database as Database).sqlite
      .prepare("update runs set workspace = ? where id = ?")
      .run(root, run.id);
    mkdirSync(join(root, "other-session"), { recursive: true });
    writeFileSync(join(root, "other-session", "user.txt"), "another session's\n");
    const refused = await h.request("POST", `/api/runs/${run.id}/rollback`, { iteration: 0 });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: "workspace_missing", workspace: root });
    expect(refused.body.error.message).toContain("is WORKSPACES_ROOT itself");
    expect(readFileSync(join(root, "other-session", "user.txt"), "utf8")).toBe(
      "another session's\n",
    );
  });
});

describe("a rollback whose restore is done while the database is unavailable", () => {
  it("records it and releases the workspace once the database answers again: 200, one event", async () => {
    const run = await finishedRun();
    writeFileSync(join(run.workspace, "kept.txt"), "changed by the run\n");
    // The database fails the writes after the restore twice, as one that is down a moment does.
    const down = new Error("Connection terminated: the database did not answer within 10 ms");
    const failures = { recordRollback: 2, releaseWorkspace: 0 };
    const repo = new Proxy(h.repo, {
      get(target, name, receiver) {
        if (name === "isUnavailable") return (error: unknown) => error === down;
        const value = Reflect.get(target, name, receiver);
        if (name !== "recordRollback" && name !== "releaseWorkspace") {
          return typeof value === "function" ? value.bind(target) : value;
        }
        return (...args: unknown[]) => {
          if (failures[name] > 0) {
            failures[name]--;
            // Once the event is written, its release fails once too.
            if (name === "recordRollback" && failures.recordRollback === 0) {
              failures.releaseWorkspace = 1;
            }
            throw down;
          }
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const app = h.appWith({ repo, snapshotsDir, workspacesRoot: h.workspacesRoot });
    const res = await app.request(`/api/runs/${run.id}/rollback`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ iteration: 0 }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(failures).toEqual({ recordRollback: 0, releaseWorkspace: 0 });
    expect(readFileSync(join(run.workspace, "kept.txt"), "utf8")).toBe("before the run\n");
    const events = await h.repo.listEvents(run.id, 0, 1000);
    expect(events.filter((e) => e.type === "rollback_applied")).toHaveLength(1);
    // The hold is gone: another rollback is not refused as busy.
    const again = await h.request("POST", `/api/runs/${run.id}/rollback`, { iteration: 0 });
    expect(again.status).toBe(200);
  });
});
