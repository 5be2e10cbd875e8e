import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  auth,
  chromiumAvailable,
  type Dashboard,
  openDashboard,
  tree,
} from "./support/dashboard-browser";
import { type Stack, shq } from "./support/stack";

// Steering a run from its page in Chromium: a plan approved or rejected, a workspace rolled back.

describe.skipIf(!chromiumAvailable)("dashboard in Chromium: steering a run (API_TOKEN set)", () => {
  let d: Dashboard;
  let stack: Stack;
  let page: Page;
  beforeAll(async () => {
    d = await openDashboard(inject("redisUrl"), {
      // The rollback test provokes one refusal while the session is busy.
      expectedErrors: [{ status: 409, path: /\/rollback$/ }],
    });
    await d.signIn();
    stack = d.stack;
    page = d.page;
  });
  afterAll(async () => {
    await d?.close();
  });
  const shot = (name: string) => d.shot(name);
  const textOf = (selector: string) => d.textOf(selector);
  const waitText = (selector: string, text: string, timeout?: number) =>
    d.waitText(selector, text, timeout);
  const acceptNextDialog = () => d.acceptNextDialog();

  /**
   * Submits a run whose planning phase proposes `plan` (then touches `done`, which its test
   * wants) and opens its page once the plan waits for approval, shown there.
   */
  async function openPlanAwaitingApproval(task: string, sessionId: string, plan: string) {
    const created = await stack.api(
      "POST",
      "/api/runs",
      {
        task,
        sessionId,
        agent: {
          type: "command",
          command: `if [ -n "$LOOPRUN_PHASE" ]; then echo ${shq(plan)}; exit 0; fi; touch done`,
        },
        testCommand: "test -f done",
        phases: ["planning"],
        approval: "plan",
        cooldownMs: 0,
      },
      auth,
    );
    expect(created.status).toBe(202);
    await page.goto(`${stack.url}/runs/${created.body.id}`);
    await waitText("#run-status", "awaiting approval");
    await page.locator("#approval:not([hidden])").waitFor();
    expect(await textOf("#approval-text")).toContain(plan);
  }

  it("shows a plan that waits for approval and approves it from the run page", async () => {
    await openPlanAwaitingApproval("Approve from the page", "dash-approve", "1. touch done");
    expect(await page.isHidden("#reply-form")).toBe(true);
    await shot("run-awaiting-approval");
    await page.click("#approve-run");
    await waitText("#run-status", "succeeded", 20_000);
    await waitText("#events", "approval_granted");
    expect(await page.isHidden("#approval")).toBe(true);
  });

  /**
   * Writes `files` into a new workspace of `name` (its session too), submits a run there with
   * the agent `command` and the test `test`, and opens its page. Returns the run's id and its
   * workspace.
   */
  async function openRunIn(
    name: string,
    files: Record<string, string>,
    run: { task: string; command: string; test: string },
  ): Promise<{ id: string; ws: string }> {
    const ws = join(stack.workspacesRoot, name);
    mkdirSync(ws);
    for (const [file, text] of Object.entries(files)) writeFileSync(join(ws, file), text);
    const created = await stack.api(
      "POST",
      "/api/runs",
      {
        task: run.task,
        sessionId: name,
        workspace: name,
        agent: { type: "command", command: run.command },
        testCommand: run.test,
        cooldownMs: 0,
      },
      auth,
    );
    expect(created.status).toBe(202);
    await page.goto(`${stack.url}/runs/${created.body.id}`);
    return { id: created.body.id, ws };
  }

  it("rolls a run's workspace back from its page, and shows the refusal while the session is busy", async () => {
    // The workspace as the run finds it (tree() gives the files in this shape).
    const before = { "a.txt": "A0\n", "b.txt": "B0\n" };
    const { id, ws } = await openRunIn("dash-rollback", before, {
      task: "Roll back from the page",
      command:
        'if [ "$LOOPRUN_ITERATION" = 1 ]; then echo A1 > a.txt; rm b.txt; else touch done; fi',
      test: "test -f done",
    });
    await waitText("#run-status", "succeeded");
    await page.locator("#rollback-run:not([disabled])").waitFor();
    expect(tree(ws)).toEqual({ "a.txt": "A1\n", done: "" });

    await page.fill("#rollback-iteration", "1");
    acceptNextDialog();
    await page.click("#rollback-run");
    await waitText("#rollback-result", "restored as after iteration 1");
    expect(await textOf("#rollback-result")).toContain("removed done");
    expect(tree(ws)).toEqual({ "a.txt": "A1\n" });

    await page.fill("#rollback-iteration", "0");
    acceptNextDialog();
    await page.click("#rollback-run");
    await waitText("#rollback-result", "restored as it was before the run");
    expect(await textOf("#rollback-result")).toContain("restored b.txt");
    expect(tree(ws)).toEqual(before);
    await waitText("#events", "rollback_applied");
    await page.locator('#events li.event[data-type="rollback_applied"]').nth(1).waitFor();
    // Newest first: the rollback to 0 on top, after run_finished.
    expect(await page.locator("#events li.event").first().getAttribute("data-type")).toBe(
      "rollback_applied",
    );
    expect(await textOf("#events li.event")).toContain("workspace rolled back to before the run");
    await shot("run-rolled-back");
    // A reload shows them too: the event stream ends at run_finished, the page reads the rest.
    await page.reload();
    await waitText("#run-status", "succeeded");
    await page.locator('#events li.event[data-type="rollback_applied"]').nth(1).waitFor();
    expect(await page.locator('#events li.event[data-type="rollback_applied"]').count()).toBe(2);

    // Another run of the session holds it: the page shows the API's refusal.
    const gate = join(stack.dir, "release-dash-rollback");
    const busy = await stack.api(
      "POST",
      "/api/runs",
      {
        task: "Hold the session",
        sessionId: "dash-rollback",
        agent: { type: "command", command: `while [ ! -f ${gate} ]; do sleep 0.05; done` },
        testCommand: "true",
        cooldownMs: 0,
      },
      auth,
    );
    expect(busy.status).toBe(202);
    // After the refusal the page reads the run again: the refusal must outlast that.
    const readAgain = page.waitForResponse(
      (res) =>
        res.request().method() === "GET" && new URL(res.url()).pathname === `/api/runs/${id}`,
    );
    acceptNextDialog();
    await page.click("#rollback-run");
    await waitText("#run-error", "409");
    expect(await textOf("#run-error")).toContain(`run ${busy.body.id} is active`);
    await readAgain;
    await page.waitForTimeout(500);
    expect(await page.isVisible("#run-error")).toBe(true);
    expect(tree(ws)).toEqual(before);
    writeFileSync(gate, "");
  });

  it("downloads the run's whole change from its page, a patch git applies to the files as they were", async () => {
    const { id } = await openRunIn(
      "dash-patch",
      { "a.txt": "A0\n" },
      { task: "Change two files", command: "echo A1 > a.txt; echo C > c.txt", test: "true" },
    );
    await waitText("#run-status", "succeeded");
    await page.locator("#download-patch:not([disabled])").waitFor();
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.click("#download-patch"),
    ]);
    expect(download.suggestedFilename()).toBe(`looprun-${id}.patch`);
    const saved = join(stack.dir, "downloaded.patch");
    await download.saveAs(saved);
    const patch = readFileSync(saved, "utf8");
    expect(patch).toBe((await stack.api("GET", `/api/runs/${id}/patch`, undefined, auth)).body);
    const copy = join(stack.dir, "dash-patch-before");
    mkdirSync(copy);
    writeFileSync(join(copy, "a.txt"), "A0\n");
    execFileSync("git", ["apply", saved], { cwd: copy });
    expect(tree(copy)).toEqual({ "a.txt": "A1\n", "c.txt": "C\n" });
  });

  it("rejects a plan from the run page: the run ends stopped with the reason", async () => {
    await openPlanAwaitingApproval("Reject from the page", "dash-reject", "1. rm -rf /");
    await page.fill("#reject-reason", "far too risky");
    acceptNextDialog();
    await page.click("#reject-run");
    await waitText("#run-status", "stopped", 20_000);
    await waitText("#events", "approval_rejected");
    expect(await textOf("#run-reason")).toContain("plan rejected: far too risky");
    expect(await page.isHidden("#approval")).toBe(true);
  });

  it("raised no error in the page", () => {
    expect(d.pageErrors).toEqual([]);
  });
});
