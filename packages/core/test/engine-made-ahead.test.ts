import { readFileSync } from "node:fs";
import { join } from "node:path";
import { closeSnapshotsOf, type EngineResources, runStep } from "@looprun/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { engine, seed, useEngineFixture } from "./engine-support";
import { removeDir, resources, tempDir } from "./support";

// A worker's snapshot store makes the files of the next snapshot's objects ahead
// (spare-files.ts) while the iteration's validation runs — not as the snapshot takes them, which
// made them beside the renames out of the same directory, or beside the next agent
// (bench/RESULTS.md, the thirty-eighth session).

useEngineFixture();

let dir: string;
let objects: string;
let res: EngineResources;
beforeEach(async () => {
  dir = await tempDir("looprun-made-ahead-");
  const snapshotsDir = join(dir, "snapshots");
  objects = join(snapshotsDir, "objects");
  res = resources(engine.store, { snapshotsDir, spareFiles: 3 });
});
afterEach(async () => {
  await closeSnapshotsOf(res);
  await removeDir(dir);
});

/** A shell command writing how many spare files the store holds into `file`. */
const countInto = (file: string) => `ls ${objects} | grep -c '^tmp_spare_' > ${file}`;
const counted = (file: string) => Number(readFileSync(join(engine.ws, file), "utf8").trim());

describe("the files a snapshot writes, made ahead", () => {
  it("are made while the validation runs, not while the next agent does", async () => {
    const run = seed({
      maxIterations: 5,
      cooldownMs: 0,
      agent: {
        type: "command",
        command: `${countInto("agent-$LOOPRUN_ITERATION.txt")}; echo "$LOOPRUN_ITERATION" >> work.txt`,
      },
      testCommand: `sleep 0.3; ${countInto("check-$LOOPRUN_ITERATION.txt")}; [ "$LOOPRUN_ITERATION" -ge 3 ]`,
    });
    expect(await runStep(res, run.id)).toMatchObject({ kind: "finished", status: "succeeded" });
    // While each validation ran, the store had its three again.
    expect([1, 2, 3].map((n) => counted(`check-${n}.txt`))).toEqual([3, 3, 3]);
    // The snapshot after it took some (the workspace changed: a blob, trees, a commit), and
    // none was made while the next agent ran.
    expect(counted("agent-2.txt")).toBeLessThan(3);
    expect(counted("agent-3.txt")).toBeLessThan(3);
  });

  it("are made while the agent runs when no validation command follows it", async () => {
    const verdict = (blocking: string) =>
      `{"blockingIssues": [${blocking}], "nonBlockingIssues": [], "score": 50, "fixPlan": []}`;
    const run = seed({
      maxIterations: 5,
      cooldownMs: 0,
      agent: {
        type: "command",
        command: `sleep 0.3; ${countInto("agent-$LOOPRUN_ITERATION.txt")}; echo "$LOOPRUN_ITERATION" >> work.txt`,
      },
      validationCommands: [],
      // Blocks until the third iteration: the reviewer is no command before the snapshot.
      review: {
        type: "command",
        command: `cat > /dev/null; if [ "$(wc -l < work.txt)" -ge 3 ]; then echo '${verdict("")}'; else echo '${verdict('"not yet"')}'; fi`,
      },
    });
    expect(await runStep(res, run.id)).toMatchObject({ kind: "finished", status: "succeeded" });
    expect([2, 3].map((n) => counted(`agent-${n}.txt`))).toEqual([3, 3]);
  });
});
