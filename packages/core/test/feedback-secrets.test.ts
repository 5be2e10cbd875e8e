import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Redactor, runStep } from "@looprun/core";
import { describe, expect, it } from "vitest";
import { FEEDBACK_OUTPUT_BYTES } from "../src/validation/validation-runner";
import { engine, seed, useEngineFixture } from "./engine-support";
import { resources } from "./support";

useEngineFixture();

describe("the feedback of a failed iteration", () => {
  it("cuts outputs that were redacted first: no piece of a secret is left at a cut", async () => {
    const secret = "s3cr3t-VALUE-0123456789abcdef";
    // The feedback keeps the last 32 KiB of the output: its cut falls inside the secret.
    const output = `${"A".repeat(40_000)}\ntoken is ${secret}${"B".repeat(FEEDBACK_OUTPUT_BYTES - 16)}`;
    writeFileSync(join(engine.ws, "out.txt"), output);
    const run = seed({
      agent: { type: "command", command: "cat out.txt; exit 3" },
      testCommand: "cat out.txt; exit 1",
      maxIterations: 1,
    });
    const res = resources(engine.store, { redactor: new Redactor([secret]) });
    expect(await runStep(res, run.id)).toMatchObject({ kind: "finished", status: "failed" });
    const [it1] = engine.store.iterationsOf(run.id);
    const stored = JSON.stringify(it1);
    for (let start = 0; start + 8 <= secret.length; start++) {
      expect(stored, `a piece of the secret from character ${start}`).not.toContain(
        secret.slice(start, start + 8),
      );
    }
    expect(it1?.feedback).toContain("Validation failed");
  });
});
