import { runStep } from "@looprun/core";
import { describe, expect, it } from "vitest";
import { engine, expectEventInvariants, seed, types, useEngineFixture } from "./engine-support";
import { resources } from "./support";

// A run that names a completion promise ends when the agent prints it, and only then. The
// promise's parsing: completion-promise.test.ts; the loop itself: engine.test.ts.

useEngineFixture();

describe("runStep with a completion promise", () => {
  it("succeeds on the completion promise", async () => {
    const run = seed({
      agent: { type: "command", command: "echo '<promise>DONE</promise>'" },
      completionPromise: "DONE",
    });
    expect(await runStep(resources(engine.store), run.id)).toEqual({
      kind: "finished",
      status: "succeeded",
      reason: "success",
    });
    const [it1] = engine.store.iterationsOf(run.id);
    expect(it1?.prompt).toContain("<promise>DONE</promise>");
    expect(it1?.validation).toEqual([]);
    expect(types(engine.store.eventsOf(run.id))).toEqual([
      "run_started",
      "iteration_started",
      "agent_started",
      "agent_finished",
      "run_finished",
    ]);
  });

  it("retries while the promise is missing, even when validation passes", async () => {
    const run = seed({
      agent: {
        type: "command",
        command:
          'if [ "$LOOPRUN_ITERATION" = 2 ]; then echo "<promise>DONE</promise>"; else echo "<promise>NOT YET</promise>"; fi',
      },
      testCommand: "true",
      completionPromise: "DONE",
      cooldownMs: 0,
    });
    expect(await runStep(resources(engine.store), run.id)).toMatchObject({ status: "succeeded" });
    const its = engine.store.iterationsOf(run.id);
    expect(its.map((i) => i.outcome)).toEqual(["promise_missing", "complete"]);
    expect(its[0]?.feedback).toContain("The completion promise was not given");
    // What it printed instead is named: the agent can see the text was wrong, not missing.
    expect(its[0]?.feedback).toContain(
      "You printed <promise>NOT YET</promise>: the text must be exactly DONE.",
    );
    expect(its[1]?.prompt).toContain("The completion promise was not given");
    // An event says why iteration 1 went round again, though its command passed.
    const events = engine.store.eventsOf(run.id);
    const missing = events.filter((e) => e.type === "promise_missing");
    expect(missing.map((e) => e.data)).toEqual([
      expect.objectContaining({ iteration: 1, completionPromise: "DONE" }),
    ]);
    const of1 = types(events.filter((e) => e.data.iteration === 1));
    expect(of1.indexOf("promise_missing")).toBe(of1.indexOf("validation_passed") + 1);
    expectEventInvariants(events);
  });

  it("does not finish the run of an agent that prints its prompt back (the prompt names the promise)", async () => {
    const run = seed({
      agent: { type: "command", command: "cat" },
      completionPromise: "DONE",
      maxIterations: 2,
      cooldownMs: 0,
    });
    expect(await runStep(resources(engine.store), run.id)).toMatchObject({
      status: "failed",
      reason: "max_iterations",
    });
    const its = engine.store.iterationsOf(run.id);
    expect(its.map((i) => i.outcome)).toEqual(["promise_missing", "promise_missing"]);
    // Its output did carry the tag: the prompt's, and the feedback's in iteration 2.
    expect(its[1]?.agent?.output).toContain("print <promise>DONE</promise> on its own line");
    expect(its[1]?.agent?.output).toContain("print <promise>DONE</promise> only when");
    // Lines of the prompt are no promise, nor a wrong one.
    expect(its[1]?.feedback).not.toContain("You printed");
  });

  it("succeeds on a promise that more output than the stored tail follows", async () => {
    const run = seed({
      agent: {
        type: "command",
        command: "echo '<promise>DONE</promise>'; head -c 200000 /dev/zero | tr '\\0' x; echo",
      },
      completionPromise: "DONE",
    });
    expect(await runStep(resources(engine.store), run.id)).toMatchObject({ status: "succeeded" });
    const [it1] = engine.store.iterationsOf(run.id);
    expect(it1?.outcome).toBe("complete");
    expect(it1?.agent?.output).not.toContain("<promise>");
  });
});
