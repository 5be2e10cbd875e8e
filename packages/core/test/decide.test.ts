import { decideIteration, type IterationFacts, REVIEW_FEEDBACK_BYTES } from "@looprun/core";
import { describe, expect, it } from "vitest";

/** DESIGN's list of iteration outcomes: an iteration records one of these, and no other. */
const DESIGN_OUTCOMES = [
  "complete",
  "agent_failed",
  "validation_failed",
  "review_blocking",
  "promise_missing",
  "stopped",
  "budget_exhausted",
  "error",
];

const facts = (patch: Partial<IterationFacts> = {}): IterationFacts => ({
  agentExitCode: 0,
  agentOutput: "",
  validationPassed: true,
  validationFeedback: "",
  promiseFound: null,
  completionPromise: null,
  consecutiveFailures: 0,
  review: null,
  blockedQuestion: null,
  ...patch,
});

const blocking = { blockingIssues: ["x is wrong"], nonBlockingIssues: [], score: 10, fixPlan: [] };

describe("decideIteration", () => {
  it("names the first gate that failed, or the agent when it failed", () => {
    expect(decideIteration(facts()).outcome).toBe("complete");
    expect(decideIteration(facts({ validationPassed: false })).outcome).toBe("validation_failed");
    expect(decideIteration(facts({ promiseFound: false, completionPromise: "DONE" })).outcome).toBe(
      "promise_missing",
    );
    expect(decideIteration(facts({ review: blocking })).outcome).toBe("review_blocking");
    expect(decideIteration(facts({ agentExitCode: 1, validationPassed: false })).outcome).toBe(
      "agent_failed",
    );
  });

  it("says what a failed agent printed last, or that it printed nothing", () => {
    const failed = { validationPassed: false, validationFeedback: "t failed" };
    const printed = decideIteration(facts({ ...failed, agentExitCode: 2, agentOutput: "boom\n" }));
    const silent = decideIteration(facts({ ...failed, agentExitCode: 1, agentOutput: " \n" }));
    if (printed.kind !== "retry" || silent.kind !== "retry") throw new Error("expected retries");
    expect(printed.feedback).toMatch(
      /^The agent exited with code 2\. Its output ended with:\nboom\n\n/,
    );
    expect(silent.feedback).toMatch(/^The agent exited with code 1\. It printed nothing\.\n\n/);
    // Killed (its timeout): no exit code to tell, and no "code none".
    const killed = decideIteration(facts({ ...failed, agentExitCode: null, agentOutput: "" }));
    if (killed.kind !== "retry") throw new Error("expected a retry");
    expect(killed.feedback).toMatch(
      /^The agent was killed \(it did not exit by itself\)\. It printed/,
    );
  });

  it("hands on a failed agent's last 4,000 characters as a terminal shows them, never half an emoji", () => {
    const failed = { validationPassed: false, validationFeedback: "t failed", agentExitCode: 1 };
    const emoji = decideIteration(facts({ ...failed, agentOutput: `x${"😀".repeat(3000)}\n` }));
    const shown = decideIteration(
      facts({
        ...failed,
        agentOutput: `${"a".repeat(5000)}\n\x1b[31mRED\x1b[0m plain\r\nNUL:a\u0000b\n10%\r20%\r30% done\n`,
      }),
    );
    if (emoji.kind !== "retry" || shown.kind !== "retry") throw new Error("expected retries");
    const output = (feedback: string) =>
      feedback.slice(feedback.indexOf("ended with:\n") + 12, feedback.indexOf("\n\nValidation"));
    expect(output(emoji.feedback)).toBe("😀".repeat(1999));
    expect(output(shown.feedback)).toBe(`${"a".repeat(3973)}\nRED plain\nNUL:ab\n30% done`);
  });

  it("keeps a blocking review's feedback to its first 16 KiB, its first issues and plan", () => {
    const many = Array.from({ length: 100 }, (_, i) => `issue ${i}: ${"y".repeat(3900)}`);
    const decision = decideIteration(
      facts({ review: { blockingIssues: many, nonBlockingIssues: many, score: 0, fixPlan: many } }),
    );
    if (decision.kind !== "retry") throw new Error(`expected a retry, got ${decision.kind}`);
    expect(Buffer.byteLength(decision.feedback)).toBeLessThan(REVIEW_FEEDBACK_BYTES + 1024);
    expect(decision.feedback).toContain("The reviewer found 100 blocking issues");
    expect(decision.feedback).toContain("issue 0: ");
    expect(decision.feedback).toMatch(/bytes cut …\]$/);
  });

  it("a blocked agent waits for a reply, recorded with the gate that failed (an outcome of the design's list)", () => {
    const cases: [Partial<IterationFacts>, string][] = [
      [{ validationPassed: false }, "validation_failed"],
      [{ promiseFound: false, completionPromise: "DONE" }, "promise_missing"],
      [{ review: blocking }, "review_blocking"],
      // The mistral agent's turn ends with exit code 1 when it is blocked: asking is not a
      // failed agent phase.
      [{ agentExitCode: 1, validationPassed: false }, "validation_failed"],
    ];
    for (const [patch, outcome] of cases) {
      const decision = decideIteration(
        facts({ ...patch, blockedQuestion: "which one?", consecutiveFailures: 2 }),
      );
      expect(decision, outcome).toMatchObject({
        kind: "await_reply",
        status: "failed",
        outcome,
        question: "which one?",
        consecutiveFailures: 2,
      });
      expect(DESIGN_OUTCOMES).toContain(decision.outcome);
      expect(decision.kind === "await_reply" && decision.feedback).toContain("which one?");
    }
  });

  it("a blocked agent whose gates all passed completes: the gates decide", () => {
    expect(decideIteration(facts({ blockedQuestion: "which one?" }))).toMatchObject({
      kind: "complete",
      outcome: "complete",
    });
  });
});
