import { normalizeSubmission, RunSubmission, SPEC_DEFAULTS } from "@looprun/core";
import { describe, expect, it } from "vitest";

const agent = { type: "command", command: "./agent.sh" };

function parse(body: Record<string, unknown>) {
  return RunSubmission.safeParse(body);
}

describe("RunSubmission + normalizeSubmission", () => {
  it("applies the defaults", () => {
    const spec = normalizeSubmission(
      RunSubmission.parse({ task: "fix it", agent, testCommand: "npm test" }),
    );
    // toMatchObject: the spec grows with later features (each with its own default).
    expect(spec).toMatchObject({
      task: "fix it",
      requirements: null,
      filePaths: [],
      validationCommands: ["npm test"],
      validationTimeoutMs: SPEC_DEFAULTS.validationTimeoutMs,
      completionPromise: null,
      agent: { type: "command", command: "./agent.sh", timeoutMs: 600_000 },
      review: { type: "none" },
      maxIterations: 6,
      maxMinutes: 45,
      maxTokens: null,
      cooldownMs: SPEC_DEFAULTS.cooldownMs,
    });
  });

  it("names every problem of a body at once: a missing gate beside a missing agent or an unknown key", () => {
    const paths = (body: Record<string, unknown>) =>
      parse(body).error?.issues.map((issue) => issue.path.join("."));
    expect(paths({ task: "t" })).toEqual(["agent", ""]);
    expect(paths({ task: "t", agent, testComand: "npm test" })).toEqual(["", ""]);
    expect(parse({ task: "t", agent, testComand: "npm test" }).error?.issues).toEqual([
      expect.objectContaining({ code: "unrecognized_keys", keys: ["testComand"] }),
      expect.objectContaining({ message: expect.stringContaining("at least one gate") }),
    ]);
    // A gate field that is itself wrong is named; the missing gate is not said on top of it.
    expect(paths({ task: "t", agent, testCommand: 3 })).toEqual(["testCommand"]);
    expect(paths({ task: "t", approval: "plan", testCommand: "x" })).toEqual(["agent"]);
    expect(paths({ task: "t", agent, approval: "plan" })).toEqual(["approval", ""]);
  });

  it("puts testCommand first, then validationCommands", () => {
    const spec = normalizeSubmission(
      RunSubmission.parse({
        task: "t",
        agent,
        testCommand: "npm test",
        validationCommands: ["npm run lint", "npm run typecheck"],
      }),
    );
    expect(spec.validationCommands).toEqual(["npm test", "npm run lint", "npm run typecheck"]);
  });

  it("accepts maxAttempts as a legacy alias of maxIterations", () => {
    const spec = normalizeSubmission(
      RunSubmission.parse({ task: "t", agent, testCommand: "x", maxAttempts: 3 }),
    );
    expect(spec.maxIterations).toBe(3);
  });

  it("lets maxIterations win over maxAttempts", () => {
    const spec = normalizeSubmission(
      RunSubmission.parse({ task: "t", agent, testCommand: "x", maxAttempts: 3, maxIterations: 9 }),
    );
    expect(spec.maxIterations).toBe(9);
  });

  it("keeps the given budget and cooldown", () => {
    const spec = normalizeSubmission(
      RunSubmission.parse({
        task: "t",
        agent,
        completionPromise: "DONE",
        maxMinutes: 0.5,
        maxTokens: 1000,
        cooldownMs: 0,
      }),
    );
    expect(spec).toMatchObject({
      maxMinutes: 0.5,
      maxTokens: 1000,
      cooldownMs: 0,
      completionPromise: "DONE",
    });
    expect(spec.validationCommands).toEqual([]);
  });

  it("takes focus files inside the workspace and refuses those outside it", () => {
    const body = { task: "t", agent, testCommand: "x" };
    for (const inside of ["src/cart.ts", "./a", "a/../b", "a/b/../../c", "a//b", "..x/y", "a/.."]) {
      expect(parse({ ...body, filePaths: [inside] }).success, inside).toBe(true);
    }
    for (const outside of [
      "/etc/passwd",
      "..",
      "../x",
      "a/../../x",
      "./../x",
      "a/b/../../..",
      "a\0b",
    ]) {
      const result = parse({ ...body, filePaths: ["ok.ts", outside] });
      expect(result.success, outside).toBe(false);
      expect(result.error?.issues.map((i) => i.path.join("."))).toEqual(["filePaths.1"]);
    }
  });

  it("refuses a body without any gate, with an issue on the body as a whole", () => {
    const result = parse({ task: "t", agent });
    expect(result.success).toBe(false);
    const issues = result.error?.issues ?? [];
    expect(issues).toHaveLength(1);
    expect(issues[0]?.path).toEqual([]);
    expect(issues[0]?.message).toMatch(/gate/);
  });

  it("does not count an empty validationCommands list or review none as a gate", () => {
    const result = parse({ task: "t", agent, validationCommands: [], review: { type: "none" } });
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((i) => i.path)).toEqual([[]]);
  });

  it.each([
    ["testCommand", { testCommand: "npm test" }],
    ["validationCommands", { validationCommands: ["npm run lint"] }],
    ["completionPromise", { completionPromise: "DONE" }],
  ])("accepts %s alone as a gate", (_name, gate) => {
    expect(parse({ task: "t", agent, ...gate }).success).toBe(true);
  });

  it("refuses unknown keys", () => {
    const result = parse({ task: "t", agent, testCommand: "x", rollbackEverything: true });
    expect(result.success).toBe(false);
    const issue = result.error?.issues[0];
    expect(issue?.code).toBe("unrecognized_keys");
    expect(issue).toMatchObject({ keys: ["rollbackEverything"] });
  });

  it("refuses a completion promise of more than one line (it is printed on a line of its own)", () => {
    const result = parse({ task: "t", agent, completionPromise: "ALL\nDONE" });
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((i) => [i.path, i.message])).toContainEqual([
      ["completionPromise"],
      "must be one line",
    ]);
  });

  it("refuses unknown keys inside the agent", () => {
    const result = parse({ task: "t", agent: { ...agent, shell: "bash" }, testCommand: "x" });
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.path).toEqual(["agent"]);
  });

  it("refuses an unknown agent type, naming agent.type", () => {
    const result = parse({
      task: "t",
      agent: { type: "telepathy", command: "x" },
      testCommand: "x",
    });
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((i) => i.path)).toContainEqual(["agent", "type"]);
  });

  it("requires the agent", () => {
    const result = parse({ task: "t", testCommand: "x" });
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((i) => i.path)).toContainEqual(["agent"]);
  });

  it.each([
    ["an empty task", { task: "   " }, ["task"]],
    ["a bad sessionId", { sessionId: "no spaces allowed" }, ["sessionId"]],
    ["maxIterations 0", { maxIterations: 0 }, ["maxIterations"]],
    ["a fractional maxIterations", { maxIterations: 1.5 }, ["maxIterations"]],
    ["maxMinutes 0", { maxMinutes: 0 }, ["maxMinutes"]],
    ["a negative cooldown", { cooldownMs: -1 }, ["cooldownMs"]],
    ["an empty testCommand", { testCommand: "  " }, ["testCommand"]],
  ])("refuses %s", (_name, patch, path) => {
    const result = parse({ task: "t", agent, testCommand: "x", ...patch });
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((i) => i.path)).toContainEqual(path);
  });

  it("trims the task and commands", () => {
    const spec = normalizeSubmission(
      RunSubmission.parse({ task: "  t  ", agent, testCommand: " npm test " }),
    );
    expect(spec.task).toBe("t");
    expect(spec.validationCommands).toEqual(["npm test"]);
  });
});
