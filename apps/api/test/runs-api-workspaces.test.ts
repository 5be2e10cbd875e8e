import { existsSync, mkdirSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { normalizeSubmission, RunSubmission } from "@looprun/core";
import { SessionWorkspaceMismatchError } from "@looprun/db";
import { describe, expect, it } from "vitest";
import { ENGINES, useApiHarness, VALID_RUN as valid } from "./api-harness";

// Where a run's workspace lies: refused escapes, a session's workspace checked again, a named
// one beside the session's. The rest of the submit and the runs' reads: runs-api.test.ts.

describe.each(ENGINES)("runs API workspaces over app.request() on %s", (engine) => {
  const h = useApiHarness(engine);

  it("refuses a workspace that leaves the root through a symlink, creating nothing outside", async () => {
    mkdirSync(h.workspacesRoot, { recursive: true });
    const outside = join(h.workspacesRoot, "..", "outside-target");
    mkdirSync(outside, { recursive: true });
    symlinkSync(outside, join(h.workspacesRoot, "escape"));
    const res = await h.request("POST", "/api/runs", { ...valid, workspace: "escape/sub" });
    expect(res.status).toBe(400);
    expect(res.body.error.issues[0].path).toBe("workspace");
    expect(existsSync(join(outside, "sub"))).toBe(false);
  });

  it("refuses a workspace that is, or lies under, a symlink to nothing (made later, the target could be anywhere)", async () => {
    mkdirSync(h.workspacesRoot, { recursive: true });
    const outside = join(h.workspacesRoot, "..", "not-made-yet");
    symlinkSync(outside, join(h.workspacesRoot, "dangling"));
    const before = await h.request("GET", "/api/runs?limit=100");
    for (const workspace of ["dangling", "dangling/sub"]) {
      const res = await h.request("POST", "/api/runs", { ...valid, workspace });
      expect(res.status, workspace).toBe(400);
      expect(res.body.error.issues[0]).toEqual({
        path: "workspace",
        message: "dangling is a symlink whose target does not exist",
      });
    }
    // A session's workspace swapped for one is refused the same way.
    const first = await h.request("POST", "/api/runs", { ...valid, sessionId: "dangles" });
    expect(first.status).toBe(202);
    await h.request("POST", `/api/runs/${first.body.id}/stop`);
    const workspace = join(h.workspacesRoot, "dangles");
    rmSync(workspace, { recursive: true, force: true });
    symlinkSync(outside, workspace);
    const again = await h.request("POST", "/api/runs", { ...valid, sessionId: "dangles" });
    expect(again.status).toBe(400);
    expect(again.body.error.issues[0].path).toBe("workspace");
    const after = await h.request("GET", "/api/runs?limit=100");
    expect(after.body.items).toHaveLength(before.body.items.length + 1);
    expect(existsSync(outside)).toBe(false);
  });

  it("refuses WORKSPACES_ROOT itself as a workspace, however it is named", async () => {
    mkdirSync(join(h.workspacesRoot, "real"), { recursive: true });
    symlinkSync(".", join(h.workspacesRoot, "here"));
    for (const workspace of [".", "./", "real/..", "here", "here/."]) {
      const res = await h.request("POST", "/api/runs", { ...valid, workspace });
      expect(res.status, workspace).toBe(400);
      expect(res.body.error.issues[0]).toEqual({
        path: "workspace",
        message: "must be a directory under WORKSPACES_ROOT, not the root itself",
      });
    }
    // A directory reached through the link is under the root: accepted.
    const under = await h.request("POST", "/api/runs", { ...valid, workspace: "here/real" });
    expect(under.status, JSON.stringify(under.body)).toBe(202);
    const run = await h.request("GET", `/api/runs/${under.body.id}`);
    expect(run.body.workspace).toBe(join(realpathSync(h.workspacesRoot), "real"));
  });

  it("refuses a run in a session whose stored workspace is WORKSPACES_ROOT (from an older looprun)", async () => {
    mkdirSync(h.workspacesRoot, { recursive: true });
    const root = realpathSync(h.workspacesRoot);
    const spec = normalizeSubmission(RunSubmission.parse(valid));
    await h.repo.createRun({
      id: "01J00000000000000000000000",
      sessionId: "old-root",
      sessionWorkspace: root,
      workspace: root,
      spec,
      createdAt: Date.now(),
    });
    // Finished: the session is free, only its workspace is in the way.
    const claimed = await h.store.claimRun("01J00000000000000000000000");
    await h.store.commit(
      "01J00000000000000000000000",
      claimed?.run.epoch ?? 0,
      { run: { status: "failed", reason: "error", finishedAt: Date.now() } },
      Date.now(),
    );
    const res = await h.request("POST", "/api/runs", { ...valid, sessionId: "old-root" });
    expect(res.status).toBe(400);
    expect(res.body.error.issues[0].path).toBe("workspace");
    // Naming a directory under the root is the way on.
    const named = await h.request("POST", "/api/runs", {
      ...valid,
      sessionId: "old-root-2",
      workspace: "elsewhere",
    });
    expect(named.status).toBe(202);
  });

  it("refuses a run in a session whose workspace has become a symlink out of the root, storing nothing", async () => {
    mkdirSync(h.workspacesRoot, { recursive: true });
    const first = await h.request("POST", "/api/runs", { ...valid, sessionId: "moved-out" });
    expect(first.status).toBe(202);
    await h.request("POST", `/api/runs/${first.body.id}/stop`);
    // What a command of the session's could do: its directory replaced by a link out.
    const outside = join(h.workspacesRoot, "..", "moved-out-target");
    mkdirSync(outside, { recursive: true });
    const workspace = join(h.workspacesRoot, "moved-out");
    rmSync(workspace, { recursive: true, force: true });
    symlinkSync(outside, workspace);
    const before = await h.request("GET", "/api/runs?sessionId=moved-out");
    const res = await h.request("POST", "/api/runs", { ...valid, sessionId: "moved-out" });
    expect(res.status).toBe(400);
    expect(res.body.error.issues[0].path).toBe("workspace");
    expect(res.body.error.message).toContain("not inside WORKSPACES_ROOT");
    const after = await h.request("GET", "/api/runs?sessionId=moved-out");
    expect(after.body.items).toHaveLength(before.body.items.length);
    // A link to a directory under the root is still under it: the run goes there.
    rmSync(workspace);
    mkdirSync(join(h.workspacesRoot, "moved-in"));
    symlinkSync("moved-in", workspace);
    const inside = await h.request("POST", "/api/runs", { ...valid, sessionId: "moved-out" });
    expect(inside.status, JSON.stringify(inside.body)).toBe(202);
    const run = await h.request("GET", `/api/runs/${inside.body.id}`);
    expect(run.body.workspace).toBe(join(realpathSync(h.workspacesRoot), "moved-in"));
  });

  it("stores a workspace named with a trailing slash as the same directory", async () => {
    const root = realpathSync(h.workspacesRoot);
    for (const [i, workspace] of ["slash", "slash/", "slash//", "./slash/."].entries()) {
      const res = await h.request("POST", "/api/runs", {
        ...valid,
        sessionId: `slash-${i}`,
        workspace,
      });
      expect(res.status, workspace).toBe(202);
      const run = await h.request("GET", `/api/runs/${res.body.id}`);
      expect(run.body.workspace, workspace).toBe(join(root, "slash"));
    }
  });

  it("refuses a workspace under a file, naming it, storing nothing", async () => {
    mkdirSync(h.workspacesRoot, { recursive: true });
    writeFileSync(join(h.workspacesRoot, "a-file"), "not a directory\n");
    const before = await h.request("GET", "/api/runs?limit=100");
    const res = await h.request("POST", "/api/runs", { ...valid, workspace: "a-file/sub" });
    expect(res.status).toBe(400);
    expect(res.body.error.issues[0]).toMatchObject({
      path: "workspace",
      message: "a-file is not a directory",
    });
    const after = await h.request("GET", "/api/runs?limit=100");
    expect(after.body.items).toHaveLength(before.body.items.length);
  });

  it("runs a session's run in the workspace it names; the session keeps its own for the next", async () => {
    const stopped = async (id: string) =>
      expect((await h.request("POST", `/api/runs/${id}/stop`)).body.status).toBe("stopped");
    const first = await h.request("POST", "/api/runs", { ...valid, sessionId: "named-ws" });
    // The first submit made the root.
    const root = realpathSync(h.workspacesRoot);
    expect((await h.request("GET", `/api/runs/${first.body.id}`)).body.workspace).toBe(
      join(root, "named-ws"),
    );
    await stopped(first.body.id);
    const named = await h.request("POST", "/api/runs", {
      ...valid,
      sessionId: "named-ws",
      workspace: "elsewhere/sub",
    });
    expect(named.status).toBe(202);
    expect((await h.request("GET", `/api/runs/${named.body.id}`)).body.workspace).toBe(
      join(root, "elsewhere", "sub"),
    );
    await stopped(named.body.id);
    const session = await h.request("GET", "/api/sessions/named-ws");
    expect(session.body.workspace).toBe(join(root, "named-ws"));
    const again = await h.request("POST", "/api/runs", { ...valid, sessionId: "named-ws" });
    expect((await h.request("GET", `/api/runs/${again.body.id}`)).body.workspace).toBe(
      join(root, "named-ws"),
    );
    // A new session that names a workspace keeps that one.
    const fresh = await h.request("POST", "/api/runs", {
      ...valid,
      sessionId: "named-ws-2",
      workspace: "shared",
    });
    expect(fresh.status).toBe(202);
    expect((await h.request("GET", "/api/sessions/named-ws-2")).body.workspace).toBe(
      join(root, "shared"),
    );
    // …and its next run, naming none, runs there (looked up), not under the session's id.
    await stopped(fresh.body.id);
    const next = await h.request("POST", "/api/runs", { ...valid, sessionId: "named-ws-2" });
    expect((await h.request("GET", `/api/runs/${next.body.id}`)).body.workspace).toBe(
      join(root, "shared"),
    );
  });

  it("accepts a new session's run after WORKSPACES_ROOT went away, creating nothing (the worker makes it)", async () => {
    await h.request("POST", "/api/runs", { ...valid, sessionId: "root-made-first" });
    const root = realpathSync(h.workspacesRoot);
    rmSync(root, { recursive: true, force: true });
    try {
      const res = await h.request("POST", "/api/runs", { ...valid, sessionId: "root-gone" });
      expect(res.status).toBe(202);
      expect((await h.request("GET", `/api/runs/${res.body.id}`)).body.workspace).toBe(
        join(root, "root-gone"),
      );
      expect(existsSync(root)).toBe(false);
    } finally {
      mkdirSync(root, { recursive: true });
    }
  });

  it("stores a run whose workspace was guessed only if its session is new or has that one; else nothing", async () => {
    const root = realpathSync(h.workspacesRoot);
    const spec = normalizeSubmission(RunSubmission.parse(valid));
    const guessed = async (id: string, sessionId: string, workspace: string) =>
      h.repo.createRun({
        id,
        sessionId,
        sessionWorkspace: workspace,
        workspace,
        spec,
        createdAt: Date.now(),
        workspaceGuessed: true,
      });
    const mine = join(root, "guess-a");
    const first = await guessed("01J0000000000000000000GS01", "guess-a", mine);
    expect((await h.repo.getSession("guess-a"))?.session.workspace).toBe(mine);
    await h.request("POST", `/api/runs/${first.id}/stop`);
    // Its own workspace again: stored.
    const second = await guessed("01J0000000000000000000GS02", "guess-a", mine);
    expect((await h.repo.getRun(second.id))?.workspace).toBe(mine);
    await h.request("POST", `/api/runs/${second.id}/stop`);
    // Another: refused, and nothing of it stored.
    const runsOfSession = async () =>
      (await h.request("GET", "/api/runs?sessionId=guess-a")).body.items;
    const before = await runsOfSession();
    await expect(
      guessed("01J0000000000000000000GS03", "guess-a", join(root, "elsewhere")),
    ).rejects.toBeInstanceOf(SessionWorkspaceMismatchError);
    expect(await h.repo.getRun("01J0000000000000000000GS03")).toBeNull();
    expect(await runsOfSession()).toEqual(before);
    expect((await h.repo.getSession("guess-a"))?.session.workspace).toBe(mine);
  });
});
