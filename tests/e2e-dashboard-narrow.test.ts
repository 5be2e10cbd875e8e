import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  auth,
  chromiumAvailable,
  type Dashboard,
  openDashboard,
  waitInPage,
} from "./support/dashboard-browser";
import type { Stack } from "./support/stack";

// The dashboard on a phone's screen, with a task of one long word; what a run's page shows of a
// command's terminal output and of a budget a successful run used up; the list's filters.

const PHONE = { width: 375, height: 812 };

describe.skipIf(!chromiumAvailable)("dashboard in Chromium on a narrow screen", () => {
  let d: Dashboard;
  let stack: Stack;
  let page: Page;
  beforeAll(async () => {
    d = await openDashboard(inject("redisUrl"), {
      // The last test signs in with a wrong token.
      expectedErrors: [{ status: 401, path: /^\/login$/ }],
    });
    await d.signIn();
    stack = d.stack;
    page = d.page;
    await page.setViewportSize(PHONE);
  });
  afterAll(async () => {
    await d?.close();
  });

  const submit = async (body: Record<string, unknown>): Promise<string> => {
    const res = await stack.api("POST", "/api/runs", body, auth);
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    return res.body.id as string;
  };
  // Code that runs in the page is given as text: these tests are compiled without the DOM's types.
  const pageWidth = async () => Number(await page.evaluate("document.documentElement.scrollWidth"));

  it("keeps a run's page, a task of 20,000 letters without a space included, and its Stop on the screen", async () => {
    const id = await submit({
      task: "A".repeat(20_000),
      sessionId: "narrow-long",
      agent: { type: "command", command: "sleep 120" },
      testCommand: "true",
    });
    try {
      await page.goto(`${stack.url}/runs/${id}`);
      await d.waitText("#run-status", "running");
      await page.locator("#stop-run:not([disabled])").waitFor();
      await d.shot("narrow-run-long-task");
      // The task scrolls in its few lines: the run's state is near the top. Asked again while the
      // page redraws the badge (each event it replays, or its refresh, replaces the element:
      // between the two, it has no box).
      await expect
        .poll(async () => (await page.locator("#run-status").boundingBox())?.y ?? Infinity)
        .toBeLessThan(PHONE.height);
      expect(await pageWidth()).toBeLessThanOrEqual(PHONE.width);
      const stop = await page.locator("#stop-run").boundingBox();
      expect(stop).not.toBeNull();
      expect(stop!.x).toBeGreaterThanOrEqual(0);
      expect(stop!.x + stop!.width).toBeLessThanOrEqual(PHONE.width);
      // Stopped, its agent is told as killed (no exit code), and no budget is "left".
      await stack.api("POST", `/api/runs/${id}/stop`, {}, auth);
      await d.waitText("#run-status", "stopped");
      await d.waitText("#events", "agent killed after");
      await d.waitText("#budget-iterations-text", "1 used of 6");
    } finally {
      await stack.api("POST", `/api/runs/${id}/stop`, {}, auth);
    }
  });

  it("lets the runs table scroll inside its card rather than cutting its columns off", async () => {
    await page.goto(`${stack.url}/`);
    await page.locator("tr.run-row").first().waitFor();
    await d.shot("narrow-runs");
    expect(await pageWidth()).toBeLessThanOrEqual(PHONE.width);
    // A person swipes (here: a sideways wheel over the table) to the columns on the right.
    const row = (await page.locator("tr.run-row").first().boundingBox())!;
    await page.mouse.move(row.x + 100, row.y + row.height / 2);
    for (let i = 0; i < 10; i++) await page.mouse.wheel(400, 0);
    const last = page.locator("#runs-body tr.run-row td").last();
    await waitInPage(
      page,
      `(() => {
        const cells = document.querySelectorAll("#runs-body tr.run-row td");
        const box = cells[cells.length - 1]?.getBoundingClientRect();
        return box !== undefined && box.right <= ${PHONE.width + 1};
      })()`,
      { timeoutMs: 5000, message: "the last column scrolled into view" },
    );
    expect(await last.isVisible()).toBe(true);
  });

  it("shows a command's coloured output as text, and a budget a successful run used up calmly", async () => {
    const id = await submit({
      task: "Colours",
      sessionId: "narrow-colours",
      agent: {
        type: "command",
        command: "printf '\\033[31mred\\033[0m and \\033[1mbold\\033[0m\\n'",
      },
      testCommand: "true",
      maxIterations: 1,
    });
    await page.goto(`${stack.url}/runs/${id}`);
    await d.waitText("#run-status", "succeeded");
    await page.locator("#iterations details summary").first().click();
    const output = await d.textOf("#iterations pre.output");
    expect(output).toContain("red and bold");
    expect(output).not.toContain("\u001b");
    // 1 of 1 iterations used by a run that succeeded: no warning colour.
    await d.waitText("#budget-iterations-text", "1 used of 1");
    expect(await page.getAttribute("#budget-iterations-bar", "class")).toBe("fill");
  });

  it("says when a filter matches no run, rather than that there are none", async () => {
    await page.goto(`${stack.url}/?sessionId=no-such-session`);
    await d.waitText("#runs-body", "No runs match these filters.");
    await page.goto(`${stack.url}/`);
    await page.locator("tr.run-row").first().waitFor();
  });

  it("takes a run that finishes out of a list of running runs", async () => {
    const id = await submit({
      task: "Runs until stopped",
      sessionId: "narrow-filter",
      agent: { type: "command", command: "sleep 120" },
      testCommand: "true",
    });
    await page.goto(`${stack.url}/?status=running`);
    const row = page.locator(`tr.run-row[data-id="${id}"]`);
    await row.waitFor();
    expect((await stack.api("POST", `/api/runs/${id}/stop`, {}, auth)).status).toBe(202);
    await row.waitFor({ state: "detached", timeout: 20_000 });
  });

  it("does not keep a token the sign-in refused (it replaced the right one in this browser)", async () => {
    expect(await page.evaluate("localStorage.getItem('looprun.token')")).not.toBeNull();
    await page.goto(`${stack.url}/login`);
    await page.fill("#login-token", "not-the-token");
    await page.click("#login-form button[type=submit]");
    await d.waitText(".login .form-error", "not the API_TOKEN");
    // The page's script runs once the page is parsed, a moment after its error shows.
    await waitInPage(page, "localStorage.getItem('looprun.token') === null", {
      message: "the refused token to be dropped",
    });
  });

  it("raised no error in the page", () => {
    expect(d.pageErrors).toEqual([]);
  });
});
