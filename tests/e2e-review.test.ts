import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, inject, it } from "vitest";
import {
  commandRun,
  expectWellFormedEvents,
  getEvents,
  getIterations,
  shq,
  submit,
  useStack,
  waitForStatus,
} from "./support/stack";

const stack = useStack(() => ({ redisUrl: inject("redisUrl") }));

describe("a reviewed run through the API and a worker process", () => {
  it("is blocked once by a command reviewer, fixes it from the fix plan, and serves reviews, diffs and the patch", async () => {
    const scripts = join(stack.dir, "review-scripts");
    mkdirSync(scripts);
    // The agent implements `slugify` wrongly first, then as the fix plan says.
    const agent = join(scripts, "agent.sh");
    writeFileSync(
      agent,
      [
        'cat > "$1/prompt.$LOOPRUN_ITERATION"',
        `if grep -q 'Lower-case the slug' "$1/prompt.$LOOPRUN_ITERATION"; then`,
        '  printf \'slugify() { echo "$1" | tr " " - | tr A-Z a-z; }\\n\' > slug.sh',
        "else",
        '  printf \'slugify() { echo "$1" | tr " " -; }\\n\' > slug.sh',
        "fi",
      ].join("\n"),
    );
    // The reviewer reads its JSON input, and blocks while slugify keeps upper case.
    const reviewer = join(scripts, "reviewer.sh");
    writeFileSync(
      reviewer,
      [
        'input=$(cat); n=$(ls "$1" | grep -c "^review-input")',
        'printf "%s" "$input" > "$1/review-input.$((n + 1)).json"',
        '. ./slug.sh; out=$(slugify "Hello World")',
        'if [ "$out" = hello-world ]; then',
        `  echo '{"blockingIssues": [], "nonBlockingIssues": ["no tests for slugify"], "score": 88, "fixPlan": []}'`,
        "else",
        `  echo '{"blockingIssues": ["slugify keeps upper case: '"$out"'"], "nonBlockingIssues": [], "score": 35, "fixPlan": ["Lower-case the slug with tr A-Z a-z"]}'`,
        "fi",
      ].join("\n"),
    );
    const workspace = join(stack.workspacesRoot, "review-e2e");
    mkdirSync(workspace);
    writeFileSync(join(workspace, "README"), "slug tools\n");
    const original = join(stack.dir, "review-original");
    mkdirSync(original);
    writeFileSync(join(original, "README"), "slug tools\n");

    const { id } = await submit(
      stack,
      commandRun(`sh ${shq(agent)} ${shq(scripts)}`, {
        task: "Write slugify in slug.sh",
        requirements: "slugify lower-cases and joins words with dashes",
        workspace: "review-e2e",
        testCommand: "test -f slug.sh",
        review: { type: "command", command: `sh ${shq(reviewer)} ${shq(scripts)}` },
        phases: ["packaging"],
      }),
    );
    const run = await waitForStatus(stack, id);
    expect(run).toMatchObject({
      status: "succeeded",
      reason: "success",
      metrics: { iterations: 2, reviewBlockings: 1, validationFailures: 0 },
      convergence: {
        iterations: 2,
        reviewBlockings: 1,
        issuesFixedAutomatically: 1,
        issuesRemaining: 0,
      },
    });

    const reviews = (await stack.api("GET", `/api/runs/${id}/reviews`)).body.items;
    expect(reviews).toHaveLength(2);
    expect(reviews[0]).toMatchObject({
      runId: id,
      phase: "review",
      iteration: 1,
      blockingIssues: ["slugify keeps upper case: Hello-World"],
      score: 35,
      fixPlan: ["Lower-case the slug with tr A-Z a-z"],
    });
    expect(reviews[1]).toMatchObject({
      iteration: 2,
      blockingIssues: [],
      nonBlockingIssues: ["no tests for slugify"],
    });
    expect((run as unknown as { latestReviewId: string }).latestReviewId).toBe(reviews[1].id);

    const iterations = await getIterations(stack, id);
    expect(iterations.map((i) => i.outcome)).toEqual(["review_blocking", "complete"]);
    expect(iterations[1]?.prompt).toContain("1. Lower-case the slug with tr A-Z a-z");
    expect(readFileSync(join(scripts, "prompt.2"), "utf8")).toBe(iterations[1]?.prompt);
    const inputs = readdirSync(scripts)
      .filter((f) => f.startsWith("review-input"))
      .sort();
    expect(inputs).toHaveLength(2);
    const input1 = JSON.parse(readFileSync(join(scripts, inputs[0]!), "utf8"));
    expect(input1).toMatchObject({
      task: "Write slugify in slug.sh",
      iteration: 1,
      validation: [{ exitCode: 0 }],
    });
    expect(input1.diff).toContain("+++ b/slug.sh");

    const events = await getEvents(stack, id);
    expectWellFormedEvents(events);
    expect(events.map((e) => e.type)).toEqual([
      "run_queued",
      "run_started",
      "iteration_started",
      "agent_started",
      "agent_finished",
      "validation_passed",
      "review_blocking_detected",
      "iteration_started",
      "agent_started",
      "agent_finished",
      "validation_passed",
      "review_approved",
      "phase_started",
      "phase_completed",
      "run_finished",
    ]);
    expect(events[6]?.data).toMatchObject({
      blockingIssues: 1,
      nonBlockingIssues: 0,
      score: 35,
      fixPlan: ["Lower-case the slug with tr A-Z a-z"],
    });

    const diff1 = await stack.api("GET", `/api/runs/${id}/iterations/1/diff`);
    expect(diff1.status).toBe(200);
    expect(diff1.headers.get("content-type")).toContain("text/plain");
    expect(diff1.body).toContain("new file mode");
    expect(diff1.body).toContain('+slugify() { echo "$1" | tr " " -; }');
    const diff2 = await stack.api("GET", `/api/runs/${id}/iterations/2/diff`);
    expect(diff2.body).toContain('-slugify() { echo "$1" | tr " " -; }');
    expect(diff2.body).toContain('+slugify() { echo "$1" | tr " " - | tr A-Z a-z; }');
    expect((await stack.api("GET", `/api/runs/${id}/iterations/3/diff`)).status).toBe(404);

    const patch = await stack.api("GET", `/api/runs/${id}/patch`);
    expect(patch.status).toBe(200);
    const patchFile = join(stack.dir, "review.patch");
    writeFileSync(patchFile, patch.body);
    execFileSync("git", ["apply", "--check", patchFile], { cwd: original });
    execFileSync("git", ["apply", patchFile], { cwd: original });
    expect(readFileSync(join(original, "slug.sh"), "utf8")).toBe(
      readFileSync(join(workspace, "slug.sh"), "utf8"),
    );
    expect(readFileSync(join(original, "README"), "utf8")).toBe("slug tools\n");

    const artifacts = (await stack.api("GET", `/api/runs/${id}/artifacts`)).body;
    expect(artifacts.items.map((a: { phase: string }) => a.phase)).toEqual(["packaging"]);
    expect(artifacts.change.files).toEqual(["slug.sh"]);
    // Snapshots live beside the database, never in the workspace.
    expect(existsSync(join(stack.dir, "snapshots", `${run.sessionId}.git`))).toBe(true);
    expect(readdirSync(workspace).sort()).toEqual(["README", "slug.sh"]);
  });
});
