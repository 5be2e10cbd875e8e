import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runStep } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { makeRun, removeDir, resources, tempDir, waitFor } from "./support";

const sq = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

let ws: string;
let tools: string;
let store: MemoryRunStore;
beforeEach(async () => {
  ws = await tempDir("looprun-ws-");
  tools = await tempDir("looprun-tools-");
  store = new MemoryRunStore();
});
afterEach(async () => {
  await removeDir(ws);
  await removeDir(tools);
});

/**
 * In a phase (`$LOOPRUN_PHASE`): logs it, keeps its prompt and prints its artifact (the
 * architecture phase waits for a go file when `hold` is set). In an iteration: keeps the
 * prompt and creates one of a, b per iteration.
 */
function agent(opts: { hold?: boolean } = {}): string {
  const script = join(tools, "agent.sh");
  const t = sq(tools);
  writeFileSync(
    script,
    [
      'if [ -n "$LOOPRUN_PHASE" ]; then',
      `  echo "$LOOPRUN_PHASE" >> ${t}/phases.log`,
      `  cat > ${t}/phase-$LOOPRUN_PHASE.txt`,
      opts.hold
        ? `  if [ "$LOOPRUN_PHASE" = architecture ] && [ ! -f ${t}/go ]; then touch ${t}/holding; while [ ! -f ${t}/go ]; do sleep 0.05; done; fi`
        : "  :",
      '  echo "ARTIFACT-$LOOPRUN_PHASE: the $LOOPRUN_PHASE of the work (iteration env $LOOPRUN_ITERATION)"',
      "  exit 0",
      "fi",
      `cat > ${t}/prompt-$LOOPRUN_ITERATION.txt`,
      "if [ -f a ]; then touch b; else touch a; fi",
    ].join("\n"),
  );
  return `sh ${sq(script)}`;
}

const phasesRun = () =>
  existsSync(join(tools, "phases.log"))
    ? readFileSync(join(tools, "phases.log"), "utf8").trim().split("\n")
    : [];

describe("pipeline phases", () => {
  it("runs planning, architecture and design once before iteration 1, feeds them to every prompt, and packages after success", async () => {
    const run = makeRun(
      {
        task: "Create a and b",
        agent: { type: "command", command: agent() },
        testCommand: "test -f a && test -f b",
        phases: ["planning", "architecture", "design", "packaging"],
        cooldownMs: 5,
      },
      ws,
    );
    store.add(run);
    const res = resources(store);
    expect((await runStep(res, run.id)).kind).toBe("cooldown");
    // The next step (as on another worker) does not run the phases again.
    expect(await runStep(res, run.id)).toMatchObject({ kind: "finished", status: "succeeded" });
    expect(phasesRun()).toEqual(["planning", "architecture", "design"]);

    const artifacts = await store.phaseArtifacts(run.id);
    expect(artifacts.map((a) => a.phase)).toEqual([
      "planning",
      "architecture",
      "design",
      "packaging",
    ]);
    expect(artifacts[0]?.content).toBe(
      "ARTIFACT-planning: the planning of the work (iteration env 0)\n",
    );

    // Each phase saw the task and the phases before it; none asked for code.
    const prompt = (phase: string) => readFileSync(join(tools, `phase-${phase}.txt`), "utf8");
    expect(prompt("planning")).toContain("Create a and b");
    expect(prompt("planning")).toContain("# Phase: planning");
    expect(prompt("planning")).not.toContain("ARTIFACT-");
    expect(prompt("architecture")).toContain("ARTIFACT-planning");
    expect(prompt("design")).toContain("ARTIFACT-planning");
    expect(prompt("design")).toContain("ARTIFACT-architecture");

    const its = store.iterationsOf(run.id);
    expect(its).toHaveLength(2);
    for (const it of its) {
      for (const phase of ["planning", "architecture", "design"])
        expect(it.prompt).toContain(`ARTIFACT-${phase}`);
      expect(it.prompt).toContain("# Preparation");
    }
    expect(readFileSync(join(tools, "prompt-2.txt"), "utf8")).toBe(its[1]?.prompt);

    const packaging = artifacts[3]!.content;
    expect(packaging).toContain("## Files changed (2)\n\n- a\n- b");
    expect(packaging).toContain("2 files changed");
    expect(packaging).toContain("diff --git a/a b/a");

    const types = store.eventsOf(run.id).map((e) => e.type);
    expect(types.slice(0, 7)).toEqual([
      "run_started",
      "phase_started",
      "phase_completed",
      "phase_started",
      "phase_completed",
      "phase_started",
      "phase_completed",
    ]);
    expect(types.slice(-4)).toEqual([
      "validation_passed",
      "phase_started",
      "phase_completed",
      "run_finished",
    ]);
    const completed = store.eventsOf(run.id).filter((e) => e.type === "phase_completed");
    expect(completed.map((e) => e.data.phase)).toEqual([
      "planning",
      "architecture",
      "design",
      "packaging",
    ]);
    expect(completed[3]?.data).toMatchObject({ filesChanged: 2 });
  });

  it("does not run a finished phase again when the run resumes after a hand-back", async () => {
    const run = makeRun(
      {
        agent: { type: "command", command: agent({ hold: true }) },
        testCommand: "true",
        phases: ["planning", "architecture", "design"],
      },
      ws,
    );
    store.add(run);
    const shutdown = new AbortController();
    const first = runStep(resources(store), run.id, { shutdown: shutdown.signal });
    await waitFor(() => existsSync(join(tools, "holding")), "the architecture phase to start");
    shutdown.abort();
    expect(await first).toEqual({ kind: "handed_back" });
    expect((await store.phaseArtifacts(run.id)).map((a) => a.phase)).toEqual(["planning"]);

    writeFileSync(join(tools, "go"), "");
    const before = store.eventsOf(run.id).length;
    expect(await runStep(resources(store), run.id)).toMatchObject({
      kind: "finished",
      status: "succeeded",
    });
    // Resumed as an interrupted iteration would be: said so first, then the phase again.
    const resumed = store.eventsOf(run.id).slice(before);
    expect(resumed.slice(0, 2).map((e) => [e.type, e.data.iteration ?? e.data.phase])).toEqual([
      ["run_resumed", 0],
      ["phase_started", "architecture"],
    ]);
    expect(phasesRun()).toEqual(["planning", "architecture", "architecture", "design"]);
    expect((await store.phaseArtifacts(run.id)).map((a) => a.phase)).toEqual([
      "planning",
      "architecture",
      "design",
    ]);
    expect(store.iterationsOf(run.id)[0]?.prompt).toContain("ARTIFACT-design");
  });

  it("fails the run with phase_failed when a phase fails, running no iteration", async () => {
    const run = makeRun(
      {
        agent: {
          type: "command",
          command:
            'if [ "$LOOPRUN_PHASE" = architecture ]; then echo no idea; exit 2; fi; echo fine',
        },
        testCommand: "true",
        phases: ["planning", "architecture", "design", "packaging"],
      },
      ws,
    );
    store.add(run);
    expect(await runStep(resources(store), run.id)).toEqual({
      kind: "finished",
      status: "failed",
      reason: "error",
    });
    expect(store.iterationsOf(run.id)).toEqual([]);
    const events = store.eventsOf(run.id);
    expect(events.map((e) => e.type)).toEqual([
      "run_started",
      "phase_started",
      "phase_completed",
      "phase_started",
      "phase_failed",
      "run_finished",
    ]);
    expect(events[4]?.data).toMatchObject({
      phase: "architecture",
      skipped: ["design", "implementation", "validation", "review", "packaging"],
    });
    expect(String(events[4]?.data.error)).toContain("the agent exited 2: no idea");
    expect((await store.getRun(run.id))?.summary).toMatch(/^phase_failed: architecture: /);
  });

  it("refuses phases out of order or repeated, naming the field", async () => {
    const { RunSubmission } = await import("@looprun/core");
    const base = { task: "t", agent: { type: "command", command: "true" }, testCommand: "true" };
    for (const phases of [["design", "planning"], ["planning", "planning"], ["review"]]) {
      const parsed = RunSubmission.safeParse({ ...base, phases });
      expect(parsed.success).toBe(false);
      expect(parsed.error?.issues[0]?.path[0]).toBe("phases");
    }
    expect(
      RunSubmission.safeParse({ ...base, phases: ["architecture", "packaging"] }).success,
    ).toBe(true);
  });
});
