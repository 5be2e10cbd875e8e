import { existsSync } from "node:fs";
import { join } from "node:path";
import { runStep } from "@looprun/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { StoreHarness } from "./store-harness";
import { isAlive, newRun, readPids, removeDir, resources, tempDir, waitFor } from "./support";

/** Creates a, b, c — one per iteration. */
const FIXER = "for f in a b c; do if [ ! -f $f ]; then touch $f; echo fixed $f; break; fi; done";
const CHECK =
  'missing=""; for f in a b c; do [ -f $f ] || missing="$missing $f"; done; ' +
  'if [ -n "$missing" ]; then echo "CHECK-FAILED missing:$missing"; exit 1; fi';

/** The engine (`runStep`, real commands and git) on a store: part of the store suite. */
export function engineOnStoreSuite(engine: string, harness: () => StoreHarness): void {
  let h: StoreHarness;
  beforeEach(() => {
    h = harness();
  });

  describe(`${engine}: the engine on this store`, () => {
    let ws: string;
    beforeEach(async () => {
      ws = await tempDir("looprun-ws-");
    });
    afterEach(async () => {
      await removeDir(ws);
    });

    it("writes the snapshot rows of an iteration whose worker died before writing them", async () => {
      const run = await h.createRun(
        newRun(
          { agent: { type: "command", command: FIXER }, testCommand: CHECK, cooldownMs: 0 },
          { workspace: ws },
        ),
      );
      // The first worker's write of iteration 1's snapshot rows (deferred: cooldown 0) never
      // lands, nor anything after it: it died there.
      let dead = false;
      const dying = new Proxy(h.store, {
        get(store, key) {
          if (key === "commit") {
            return (...args: Parameters<typeof store.commit>) => {
              if (dead || args[2].insertSnapshots?.some((s) => s.n === 1)) {
                dead = true;
                return new Promise(() => {});
              }
              return store.commit(...args);
            };
          }
          const value = Reflect.get(store, key, store);
          return typeof value === "function" ? value.bind(store) : value;
        },
      });
      void runStep(resources(dying), run.id);
      await waitFor(() => dead, "the first worker died");
      expect(await h.snapshots(run.id)).toEqual([]);

      expect(await runStep(resources(h.store), run.id)).toMatchObject({ status: "succeeded" });
      const snapshots = await h.snapshots(run.id);
      const first = snapshots.find((s) => s.n === 1);
      expect(first).toMatchObject({ attempt: 1 });
      expect(first?.diff).toContain("b/a");
      expect(first?.parentId).toBe((await h.getRun(run.id))?.baselineSnapshot);
    });

    it("converges in three iterations", async () => {
      const run = await h.createRun(
        newRun(
          { agent: { type: "command", command: FIXER }, testCommand: CHECK, cooldownMs: 10 },
          { workspace: ws },
        ),
      );
      const res = resources(h.store);
      expect((await runStep(res, run.id)).kind).toBe("cooldown");
      expect((await runStep(res, run.id)).kind).toBe("cooldown");
      expect(await runStep(res, run.id)).toEqual({
        kind: "finished",
        status: "succeeded",
        reason: "success",
      });

      const final = (await h.getRun(run.id))!;
      expect(final).toMatchObject({
        status: "succeeded",
        reason: "success",
        summary: "succeeded after 3 iterations",
        iteration: 3,
        epoch: 3,
      });
      expect(final.metrics).toMatchObject({ iterations: 3, validationFailures: 2 });

      const its = await h.listIterations(run.id);
      expect(its.map((i) => [i.n, i.attempt, i.status, i.outcome])).toEqual([
        [1, 1, "failed", "validation_failed"],
        [2, 1, "failed", "validation_failed"],
        [3, 1, "passed", "complete"],
      ]);
      expect(its[0]?.validation[0]).toMatchObject({
        command: CHECK,
        exitCode: 1,
        output: "CHECK-FAILED missing: b c\n",
      });
      expect(its[1]?.prompt).toContain("CHECK-FAILED missing: b c");
      expect(its[2]?.prompt).toContain("CHECK-FAILED missing: c");

      const events = await h.listEvents(run.id, 0, 1000);
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
      const step = (last: string) => ["iteration_started", "agent_started", "agent_finished", last];
      expect(events.map((e) => e.type)).toEqual([
        "run_queued",
        "run_started",
        ...step("validation_failed"),
        "cooldown_started",
        ...step("validation_failed"),
        "cooldown_started",
        ...step("validation_passed"),
        "run_finished",
      ]);
      for (const e of events) {
        expect(e.data.budget).toEqual(
          expect.objectContaining({
            elapsedMs: expect.any(Number),
            remainingIterations: expect.any(Number),
          }),
        );
      }
      expect(await h.activeRunOf(run.sessionId)).toBeNull();
    });

    it("stops a running iteration on requestStop, killing its processes", async () => {
      const run = await h.createRun(
        newRun(
          {
            agent: {
              type: "command",
              command: "echo $$ > agent.pids; sleep 30 & echo $! >> agent.pids; wait",
            },
            testCommand: "true",
          },
          { workspace: ws },
        ),
      );
      const pending = runStep(resources(h.store), run.id);
      const pidFile = join(ws, "agent.pids");
      await waitFor(
        () => existsSync(pidFile) && readPids(pidFile).length === 2,
        "the agent to start",
      );
      expect(await h.requestStop(run.id, Date.now())).toMatchObject({ kind: "stopping" });
      expect(await pending).toEqual({ kind: "finished", status: "stopped", reason: "stopped" });
      for (const pid of readPids(pidFile)) expect(isAlive(pid)).toBe(false);
      expect(await h.getRun(run.id)).toMatchObject({ status: "stopped", reason: "stopped" });
      expect(await h.listIterations(run.id)).toEqual([
        expect.objectContaining({ status: "failed", outcome: "stopped" }),
      ]);
      expect((await h.listEvents(run.id, 0, 1000)).map((e) => e.type)).toEqual([
        "run_queued",
        "run_started",
        "iteration_started",
        "agent_started",
        "stop_requested",
        "agent_finished",
        "run_finished",
      ]);
    });

    it("ends a run that was stopped while queued without running anything", async () => {
      const run = await h.createRun(newRun({}, { workspace: ws }));
      await h.requestStop(run.id, Date.now());
      expect(await runStep(resources(h.store), run.id)).toEqual({
        kind: "finished",
        status: "stopped",
        reason: "stopped",
      });
      expect(await h.listIterations(run.id)).toEqual([]);
      expect((await h.listEvents(run.id, 0, 100)).map((e) => e.type)).toEqual([
        "run_queued",
        "stop_requested",
        "run_finished",
      ]);
    });
  });
}
