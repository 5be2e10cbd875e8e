import {
  budgetSnapshot,
  budgetView,
  checkBudget,
  deadlineFor,
  type RunRecord,
} from "@looprun/core";
import { describe, expect, it } from "vitest";
import { makeRun } from "./support";

const T0 = 1_700_000_000_000;

function started(body: Record<string, unknown>, patch: Partial<RunRecord> = {}): RunRecord {
  const run = makeRun({ testCommand: "true", ...body }, "/tmp/ws");
  const deadlineAt = deadlineFor(T0, run.spec.maxMinutes);
  return { ...run, status: "running", startedAt: T0, deadlineAt, ...patch };
}

describe("deadlineFor", () => {
  it("adds maxMinutes to the start, in milliseconds", () => {
    expect(deadlineFor(T0, 45)).toBe(T0 + 45 * 60_000);
    expect(deadlineFor(T0, 0.02)).toBe(T0 + 1200);
  });
});

describe("checkBudget", () => {
  it("is ok for a fresh run", () => {
    expect(checkBudget(started({}), T0)).toEqual({ kind: "ok" });
  });

  it("counts finished iterations against maxIterations", () => {
    const run = started({ maxIterations: 3 });
    const at = (iterations: number) => ({
      ...run,
      metrics: { ...run.metrics, iterations },
    });
    expect(checkBudget(at(2), T0)).toEqual({ kind: "ok" });
    expect(checkBudget(at(3), T0)).toEqual({ kind: "exhausted", reason: "max_iterations" });
    expect(checkBudget(at(4), T0)).toEqual({ kind: "exhausted", reason: "max_iterations" });
  });

  it("is exhausted by minutes at the deadline, not before", () => {
    const run = started({ maxMinutes: 1 });
    expect(run.deadlineAt).toBe(T0 + 60_000);
    expect(checkBudget(run, T0 + 59_999)).toEqual({ kind: "ok" });
    expect(checkBudget(run, T0 + 60_000)).toEqual({ kind: "exhausted", reason: "max_minutes" });
    expect(checkBudget(run, T0 + 120_000)).toEqual({ kind: "exhausted", reason: "max_minutes" });
  });

  it("has no time limit before the run starts (no deadline yet)", () => {
    const run = makeRun({ testCommand: "true", maxMinutes: 1 }, "/tmp/ws");
    expect(checkBudget(run, T0 + 10 * 60_000)).toEqual({ kind: "ok" });
  });

  it("is exhausted by tokens only when a token budget is set", () => {
    const limited = started({ maxTokens: 1000 });
    const used = (run: RunRecord, tokens: number) => ({
      ...run,
      metrics: { ...run.metrics, tokens },
    });
    expect(checkBudget(used(limited, 999), T0)).toEqual({ kind: "ok" });
    expect(checkBudget(used(limited, 1000), T0)).toEqual({
      kind: "exhausted",
      reason: "max_tokens",
    });
    const unlimited = started({});
    expect(unlimited.spec.maxTokens).toBeNull();
    expect(checkBudget(used(unlimited, 10_000_000), T0)).toEqual({ kind: "ok" });
  });

  it("reports iterations first when several budgets are gone", () => {
    const run = started(
      { maxIterations: 1, maxTokens: 10 },
      { metrics: { ...started({}).metrics, iterations: 1, tokens: 10 } },
    );
    expect(checkBudget(run, T0 + 999 * 60_000)).toEqual({
      kind: "exhausted",
      reason: "max_iterations",
    });
  });
});

describe("budgetSnapshot", () => {
  it("is zero elapsed and the full iteration count before the start", () => {
    const run = makeRun({ testCommand: "true", maxIterations: 4 }, "/tmp/ws");
    expect(budgetSnapshot(run, T0)).toEqual({ elapsedMs: 0, remainingIterations: 4 });
  });

  it("counts elapsed time from startedAt and remaining iterations from finished ones", () => {
    const base = started({ maxIterations: 4 });
    const run = { ...base, metrics: { ...base.metrics, iterations: 1 } };
    expect(budgetSnapshot(run, T0 + 1500)).toEqual({ elapsedMs: 1500, remainingIterations: 3 });
  });

  it("stops the clock at finishedAt", () => {
    const run = started({}, { finishedAt: T0 + 700, status: "succeeded" });
    expect(budgetSnapshot(run, T0 + 99_000).elapsedMs).toBe(700);
  });

  it("never goes negative", () => {
    const base = started({ maxIterations: 2 });
    const run = { ...base, metrics: { ...base.metrics, iterations: 5 } };
    expect(budgetSnapshot(run, T0 - 10)).toEqual({ elapsedMs: 0, remainingIterations: 0 });
  });

  it("carries a reason only when given one", () => {
    const run = started({});
    expect(budgetSnapshot(run, T0)).not.toHaveProperty("reason");
    expect(budgetSnapshot(run, T0, "max_minutes")).toEqual({
      elapsedMs: 0,
      remainingIterations: 6,
      reason: "max_minutes",
    });
  });

  it("matches the run's budget view", () => {
    const run = started({ maxIterations: 3, maxMinutes: 2 });
    expect(budgetView(run, T0 + 10)).toEqual({
      maxIterations: 3,
      maxMinutes: 2,
      elapsedMs: 10,
      remainingIterations: 3,
      deadlineAt: T0 + 120_000,
      pausedMs: 0,
    });
  });
});
