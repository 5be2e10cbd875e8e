import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { failRun, runStep } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { afterEach, describe, expect, it } from "vitest";
import { killOrphanedGroup } from "../src/process/orphans";
import { isAlive, makeRun, removeDir, resources, runsForRun, tempDir } from "./support";

const children: { child: ChildProcess; detached: boolean }[] = [];

afterEach(() => {
  for (const { child, detached } of children.splice(0)) {
    try {
      process.kill(detached ? -child.pid! : child.pid!, "SIGKILL");
    } catch {
      // already gone
    }
  }
});

/** `sh -c command` with LOOPRUN_RUN_ID in its environment; `detached`: its own group. */
function start(runId: string, command: string, detached: boolean) {
  const child = spawn("/bin/sh", ["-c", command], {
    env: { PATH: process.env.PATH, LOOPRUN_RUN_ID: runId },
    detached,
    stdio: "ignore",
  });
  children.push({ child, detached });
  return child;
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Waits until `sh -c … exec sleep` runs `sleep` (its environment readable): mid-exec, a
 * process's environment cannot be read, and a search by run id would miss it.
 */
async function started(child: ChildProcess, runId: string): Promise<number> {
  const pid = child.pid!;
  await until(() => runsForRun(pid, "sleep", runId), `process ${pid} to start`);
  return pid;
}

describe.skipIf(process.platform !== "linux")("killOrphanedGroup", () => {
  it("kills an unrecorded group of the run, background children included, and spares other runs", async () => {
    const orphan = await started(start("run-a", "sleep 300 & exec sleep 300", true), "run-a");
    const other = await started(start("run-b", "exec sleep 300", true), "run-b");

    expect(killOrphanedGroup(null, "run-a")).toBe(true);
    await until(() => !isAlive(orphan), "the orphan to die");
    // The whole group: no process of it is left.
    await until(() => {
      try {
        process.kill(-orphan, 0);
        return false;
      } catch {
        return true;
      }
    }, "the orphan's group to be gone");
    expect(isAlive(other)).toBe(true);
    expect(killOrphanedGroup(null, "run-a")).toBe(false);
  });

  it("kills the recorded group, and a process of the run in this process's group alone", async () => {
    const recorded = await started(start("run-c", "exec sleep 300", true), "run-c");
    const inOurGroup = await started(start("run-c", "exec sleep 300", false), "run-c");

    expect(killOrphanedGroup(recorded, "run-c")).toBe(true);
    await until(() => !isAlive(recorded) && !isAlive(inOurGroup), "both to die");
    expect(isAlive(process.pid)).toBe(true);
  });
});

describe.skipIf(process.platform !== "linux")("a run's step and what earlier workers left", () => {
  let dir: string;
  afterEach(async () => {
    await removeDir(dir);
  });

  it("kills the run's processes when it resumes the run, not when it starts it", async () => {
    dir = await tempDir("looprun-orphans-");
    const store = new MemoryRunStore();
    const strayPidFile = join(dir, "stray.pid");
    // Its validation passes only while the process carrying its id still runs.
    const fresh = makeRun(
      { testCommand: `kill -0 "$(cat '${strayPidFile}')"` },
      join(dir, "fresh"),
    );
    const resumed = {
      ...makeRun({ testCommand: "true" }, join(dir, "resumed")),
      status: "running" as const,
      startedAt: Date.now() - 60_000,
    };
    store.add(fresh);
    store.add(resumed);
    // Processes carrying each run's id, as a dead worker's commands would.
    const strayOfFresh = await started(start(fresh.id, "exec sleep 300", true), fresh.id);
    const leftByResumed = await started(start(resumed.id, "exec sleep 300", true), resumed.id);

    writeFileSync(strayPidFile, String(strayOfFresh));

    // Nothing ran the fresh run before this step: it kills nothing as it starts (its
    // validation saw the process alive); what carries its id dies as it ends.
    expect(await runStep(resources(store), fresh.id)).toMatchObject({ status: "succeeded" });
    await until(() => !isAlive(strayOfFresh), "the fresh run's process to die at its end");

    expect(await runStep(resources(store), resumed.id)).toMatchObject({ status: "succeeded" });
    await until(() => !isAlive(leftByResumed), "the resumed run's orphan to die");
  });

  it("kills the run's processes when a run whose job failed for good is failed from outside", async () => {
    dir = await tempDir("looprun-orphans-");
    const store = new MemoryRunStore();
    // Its worker was killed mid-command too often: BullMQ gave the job up.
    const stalled = {
      ...makeRun({ testCommand: "true" }, join(dir, "stalled")),
      status: "running" as const,
      startedAt: Date.now() - 60_000,
    };
    store.add(stalled);
    const left = await started(start(stalled.id, "exec sleep 300", true), stalled.id);

    await failRun(resources(store), stalled.id, "job stalled more than allowable limit");
    expect(await store.getRun(stalled.id)).toMatchObject({ status: "failed", reason: "error" });
    await until(() => !isAlive(left), "the failed run's orphan to die");
  });
});
