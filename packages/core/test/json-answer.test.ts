import { parseJsonAnswer, ReviewFindings } from "@looprun/core";
import { describe, expect, it } from "vitest";
import { parsePlanAnswer } from "../src/agents/plan";

const findings = { blockingIssues: [], nonBlockingIssues: ["naming"], score: 90, fixPlan: [] };
const plan = { steps: [{ title: "read the failing test" }, { title: "fix add()" }] };

describe("answers that must be JSON of a shape (reviews, plans)", () => {
  it("takes the JSON bare, or from the first Markdown code block of the answer", () => {
    for (const text of [
      JSON.stringify(findings),
      `\`\`\`json\n${JSON.stringify(findings)}\n\`\`\``,
      `  \`\`\`\n${JSON.stringify(findings, null, 2)}\n\`\`\`\n`,
      // Windows line endings, a tag with a digit, words before and after the block.
      `\`\`\`json5\r\n${JSON.stringify(findings)}\r\n\`\`\``,
      `Here is my review:\n\n\`\`\`json\n${JSON.stringify(findings)}\n\`\`\`\nThat is all.`,
    ]) {
      expect(parseJsonAnswer(ReviewFindings, text)).toEqual({ ok: true, value: findings });
    }
    expect(parsePlanAnswer(`\`\`\`json\n${JSON.stringify(plan)}\n\`\`\``)).toEqual({
      ok: true,
      plan,
    });
  });

  it("names what is wrong: not JSON, or the fields that do not fit", () => {
    expect(parseJsonAnswer(ReviewFindings, "looks good to me")).toEqual({
      ok: false,
      error: "the answer is not valid JSON",
    });
    expect(parseJsonAnswer(ReviewFindings, "```\nnot json either\n```")).toEqual({
      ok: false,
      error: "the answer is not valid JSON",
    });
    expect(parseJsonAnswer(ReviewFindings, null)).toEqual({
      ok: false,
      error: "the answer is not valid JSON",
    });
    const bad = parseJsonAnswer(ReviewFindings, JSON.stringify({ ...findings, score: 101 }));
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.error).toMatch(/^score: /);
    const noSteps = parsePlanAnswer(JSON.stringify({ steps: "all of it" }));
    expect(noSteps.ok).toBe(false);
    expect(!noSteps.ok && noSteps.error).toMatch(/^steps: /);
    expect(parsePlanAnswer("[]")).toMatchObject({
      ok: false,
      error: expect.stringMatching(/^\(root\): /),
    });
  });
});
