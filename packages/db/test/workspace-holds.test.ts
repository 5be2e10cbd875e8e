import { beforeEach, describe, expect, it } from "vitest";
import { type RepoEngine, repoEngines } from "./repo-engines";
import { newRun } from "./support";

// A rollback's hold of a workspace (workspace-holds.ts), on both engines: refused while a run
// is active in the session or the workspace, or while another rollback holds it; a run's
// worker sees it (RunStore.workspaceHeldUntil) and waits.

type Engine = RepoEngine;

const TTL = 60_000;
const engines = repoEngines();

describe.each(engines)("workspace holds on %s", (_name, open) => {
  let engine: Engine;
  let close: () => Promise<void>;
  beforeEach(async () => {
    ({ engine, close } = await open());
    return () => close();
  });

  /** A finished run of session `s` in `/ws/a` whose workspace a rollback may hold. */
  async function finishedRun(sessionId: string, workspace: string) {
    const input = newRun({}, { sessionId, workspace });
    await engine.repo.createRun(input);
    const claimed = await engine.store.claimRun(input.id);
    await engine.store.commit(
      input.id,
      claimed?.run.epoch ?? 0,
      { run: { status: "failed", reason: "max_iterations", finishedAt: Date.now() } },
      Date.now(),
    );
    return input;
  }

  const hold = (run: { id: string; sessionId: string; workspace: string }, now = 1000) =>
    engine.repo.holdWorkspace({
      workspace: run.workspace,
      sessionId: run.sessionId,
      runId: run.id,
      now,
      ttlMs: TTL,
    });

  /** Until when a run of session `other` in `workspace` waits (no hold of that session). */
  const heldUntil = (workspace: string, now: number, sessionId = "other") =>
    engine.store.workspaceHeldUntil({ workspace, sessionId }, now);

  it("holds a workspace for one rollback; its runs wait until it is released", async () => {
    const done = await finishedRun("s1", "/ws/a");
    expect(await hold(done)).toEqual({ held: true });
    expect(await heldUntil("/ws/a", 2000)).toBe(1000 + TTL);
    expect(await heldUntil("/ws/other", 2000)).toBeNull();
    // A second rollback of the workspace, or of the session, is refused meanwhile.
    expect(await hold(done)).toEqual({ held: false, heldByRun: done.id });
    const sameSession = await finishedRun("s1", "/ws/elsewhere");
    expect(await hold(sameSession)).toEqual({ held: false, heldByRun: done.id });

    await engine.repo.releaseWorkspace({ ...done, runId: done.id });
    expect(await heldUntil("/ws/a", 2000)).toBeNull();
    expect(await hold(sameSession)).toEqual({ held: true });
  });

  it("leaves a run queued, unstarted, when its claim would start it in a held workspace", async () => {
    const done = await finishedRun("s1", "/ws/a");
    expect(await hold(done, 1000)).toEqual({ held: true });
    const next = newRun({}, { sessionId: "s2", workspace: "/ws/a" });
    await engine.repo.createRun(next);
    const start = (now: number) => ({
      now,
      mutation: () => ({ run: { status: "running" as const, startedAt: now } }),
    });
    expect((await engine.store.claimRun(next.id, start(2000)))?.run).toMatchObject({
      epoch: 1,
      status: "queued",
      startedAt: null,
    });
    // Once the hold expired, the next claim starts it.
    expect((await engine.store.claimRun(next.id, start(1000 + TTL)))?.run).toMatchObject({
      epoch: 2,
      status: "running",
      startedAt: 1000 + TTL,
    });
  });

  it("leaves a run of the session queued while another of its workspaces is restored", async () => {
    // The rollback holds the session's snapshot store: a run starting in another workspace of
    // the session would take its baseline snapshot there, mid-restore.
    const done = await finishedRun("s1", "/ws/a");
    expect(await hold(done, 1000)).toEqual({ held: true });
    expect(await heldUntil("/ws/b", 2000, "s1")).toBe(1000 + TTL);
    expect(await heldUntil("/ws/b", 2000, "s2")).toBeNull();
    const next = newRun({}, { sessionId: "s1", workspace: "/ws/b" });
    await engine.repo.createRun(next);
    const start = { now: 2000, mutation: () => ({ run: { status: "running" as const } }) };
    expect((await engine.store.claimRun(next.id, start))?.run).toMatchObject({
      status: "queued",
      startedAt: null,
    });
    await engine.repo.releaseWorkspace({ ...done, runId: done.id });
    expect(await heldUntil("/ws/b", 2000, "s1")).toBeNull();
    expect((await engine.store.claimRun(next.id, start))?.run).toMatchObject({
      status: "running",
    });
  });

  it("refuses while a run is active in the session, or in another session's same workspace", async () => {
    const done = await finishedRun("s1", "/ws/a");
    const active = newRun({}, { sessionId: "s1", workspace: "/ws/a" });
    await engine.repo.createRun(active);
    expect(await hold(done)).toEqual({ held: false, activeRunId: active.id });

    const other = await finishedRun("s2", "/ws/b");
    const sharing = newRun({}, { sessionId: "s3", workspace: "/ws/b" });
    await engine.repo.createRun(sharing);
    expect(await hold(other)).toEqual({ held: false, activeRunId: sharing.id });
    // Nothing was held by the refusals.
    expect(await heldUntil("/ws/a", 2000)).toBeNull();
    expect(await heldUntil("/ws/b", 2000)).toBeNull();
  });

  it("counts a workspace inside another as the same one, and a sibling named alike as another", async () => {
    const done = await finishedRun("s1", "/ws/a");
    // A run active in /ws/ab does not bar a rollback of /ws/a.
    const sibling = newRun({}, { sessionId: "s2", workspace: "/ws/ab" });
    await engine.repo.createRun(sibling);
    expect(await hold(done)).toEqual({ held: true });
    await engine.repo.releaseWorkspace({ ...done, runId: done.id });

    // A run active inside /ws/a bars it, and a rollback of a workspace inside that run's.
    const nested = newRun({}, { sessionId: "s3", workspace: "/ws/a/b" });
    await engine.repo.createRun(nested);
    expect(await hold(done)).toEqual({ held: false, activeRunId: nested.id });
    const deeper = await finishedRun("s4", "/ws/a/b/c");
    expect(await hold(deeper)).toEqual({ held: false, activeRunId: nested.id });

    // A hold bars the workspaces inside it and around it, not its siblings.
    const held = await finishedRun("s5", "/ws/x");
    expect(await hold(held)).toEqual({ held: true });
    expect(await heldUntil("/ws/x/y", 2000)).toBe(1000 + TTL);
    expect(await heldUntil("/ws", 2000)).toBe(1000 + TTL);
    expect(await heldUntil("/ws/xy", 2000)).toBeNull();
    const inner = await finishedRun("s6", "/ws/x/y");
    expect(await hold(inner)).toEqual({ held: false, heldByRun: held.id });
    const outer = await finishedRun("s7", "/ws/xy");
    expect(await hold(outer)).toEqual({ held: true });
  });

  it("refuses a hold for a run that is gone (retention deleted it since the rollback read it)", async () => {
    const done = await finishedRun("s1", "/ws/a");
    expect(
      await engine.repo.retention.deleteRuns([done.id], Date.now() + 1000, Date.now()),
    ).toEqual([done.id]);
    expect(await hold(done)).toEqual({ held: false, runGone: true });
    expect(await heldUntil("/ws/a", 2000)).toBeNull();
  });

  it("takes over a hold that expired (its API died mid-restore)", async () => {
    const done = await finishedRun("s1", "/ws/a");
    expect(await hold(done, 1000)).toEqual({ held: true });
    expect(await heldUntil("/ws/a", 1000 + TTL)).toBeNull();
    expect(await hold(done, 1000 + TTL)).toEqual({ held: true });
    expect(await heldUntil("/ws/a", 1000 + TTL)).toBe(1000 + 2 * TTL);
  });
});
