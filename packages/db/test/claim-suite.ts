import type { ClaimStart } from "@looprun/core";
import { beforeEach, describe, expect, it } from "vitest";
import { event, iteration } from "./store-fixtures";
import type { StoreHarness } from "./store-harness";
import { newRun } from "./support";

/** `RunStore.claimRun` on a store: part of the store suite. */
export function claimSuite(engine: string, harness: () => StoreHarness): void {
  let h: StoreHarness;
  beforeEach(() => {
    h = harness();
  });

  describe(`${engine}: claimRun`, () => {
    it("increments the epoch on every claim", async () => {
      const run = await h.createRun(newRun({}));
      expect((await h.store.claimRun(run.id))?.run.epoch).toBe(1);
      expect((await h.store.claimRun(run.id))?.run.epoch).toBe(2);
      expect((await h.getRun(run.id))?.epoch).toBe(2);
    });

    it("returns a finished run unchanged and a missing one as null", async () => {
      const run = await h.createRun(newRun({}));
      const claimed = (await h.store.claimRun(run.id))!;
      await h.store.commit(
        run.id,
        claimed.run.epoch,
        { run: { status: "succeeded", reason: "success" } },
        1,
      );
      expect((await h.store.claimRun(run.id))?.run).toMatchObject({
        status: "succeeded",
        epoch: claimed.run.epoch,
      });
      expect(await h.store.claimRun("nope")).toBeNull();
    });

    it("returns the latest iteration and the latest decided one", async () => {
      const run = await h.createRun(newRun({}));
      const { epoch } = (await h.store.claimRun(run.id))!.run;
      expect(await h.store.claimRun(run.id)).toMatchObject({
        lastIteration: null,
        lastDecided: null,
        started: false,
      });
      const { epoch: e2 } = (await h.store.claimRun(run.id))!.run;
      await h.store.commit(
        run.id,
        e2,
        { insertIteration: iteration(run.id, 1, 1, { status: "failed", feedback: "fix x" }) },
        1,
      );
      await h.store.commit(
        run.id,
        e2,
        { insertIteration: iteration(run.id, 2, 1, { status: "abandoned" }) },
        1,
      );
      await h.store.commit(run.id, e2, { insertIteration: iteration(run.id, 2, 2) }, 1);
      const claimed = (await h.store.claimRun(run.id))!;
      expect(claimed.run.epoch).toBe(epoch + 3);
      expect(claimed.lastIteration).toMatchObject({ n: 2, attempt: 2, status: "running" });
      expect(claimed.lastDecided).toMatchObject({
        n: 1,
        attempt: 1,
        status: "failed",
        feedback: "fix x",
      });
    });
    it("starts a queued run in its claim, and only a run never started", async () => {
      const run = await h.createRun(newRun({}));
      const asked: number[] = [];
      // A time after run_queued's: an event is never dated before the one it follows.
      const now = run.createdAt + 5000;
      const start: ClaimStart = {
        now,
        mutation: (claimed) => {
          asked.push(claimed.epoch);
          return {
            run: { status: "running", startedAt: 5000, progress: "started" },
            events: [event("run_started")],
          };
        },
      };
      const claimed = (await h.store.claimRun(run.id, start))!;
      // The mutation saw the run at its new epoch, and the claim returns the run it wrote.
      expect(asked).toEqual([1]);
      expect(claimed.run).toMatchObject({ epoch: 1, status: "running", startedAt: 5000 });
      expect(claimed.started).toBe(true);
      expect(await h.getRun(run.id)).toMatchObject({ epoch: 1, status: "running" });
      // (The API's harness may have written run_queued before.)
      const started = async () =>
        (await h.listEvents(run.id, 0, 10)).filter((e) => e.type !== "run_queued");
      expect((await started()).map((e) => [e.type, e.at])).toEqual([["run_started", now]]);
      // Claimed again (a resumed step): started already, so nothing more is written.
      const again = (await h.store.claimRun(run.id, start))!;
      expect(again.run).toMatchObject({ epoch: 2, startedAt: 5000 });
      expect(again.started).toBe(false);
      expect(asked).toEqual([1]);
      expect(await started()).toHaveLength(1);
    });

    it("does not start a run in its claim once it was started, or while it is stopping", async () => {
      const start: ClaimStart = {
        now: 5000,
        mutation: () => {
          throw new Error("must not be asked");
        },
      };
      // Queued again after a pause for a person: it was started before.
      const paused = await h.createRun(newRun({}));
      const e1 = (await h.store.claimRun(paused.id))!.run.epoch;
      await h.store.commit(paused.id, e1, { run: { status: "queued", startedAt: 10 } }, 10);
      const queued = (await h.store.claimRun(paused.id, start))!;
      expect(queued.run).toMatchObject({ status: "queued" });
      expect(queued.started).toBe(false);
      // Stopped while queued: the engine ends it without starting it.
      const stopping = await h.createRun(newRun({}));
      await h.requestStop(stopping.id, 20);
      expect(await h.store.claimRun(stopping.id, start)).toMatchObject({
        run: { status: "stopping" },
        started: false,
      });
    });
  });
}
