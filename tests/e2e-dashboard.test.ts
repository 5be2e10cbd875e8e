import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  auth,
  chromiumAvailable,
  type Dashboard,
  openDashboard,
  TOKEN,
} from "./support/dashboard-browser";
import { FakeMistral, finish } from "./support/fake-mistral";
import { type Stack, submit, waitFor } from "./support/stack";

// The dashboard in Chromium: signing in, submitting, following runs live, stopping, answering
// a blocked agent, the form's presets and errors, the list's filters and the statistics.
// Approving, rejecting and rolling back from a run's page: e2e-dashboard-steering.test.ts.

describe.skipIf(!chromiumAvailable)("dashboard in Chromium (API_TOKEN set)", () => {
  // The blocked-agent test needs an LLM: the suite's one fake.
  const fake = new FakeMistral();
  let d: Dashboard;
  let stack: Stack;
  let page: Page;
  beforeAll(async () => {
    await fake.start();
    d = await openDashboard(inject("redisUrl"), {
      env: { MISTRAL_API_KEY: "dashboard-e2e-key-0123456789", MISTRAL_SERVER_URL: fake.url },
      // The form's test provokes a 400; the run page's test answers 503 for it.
      expectedErrors: [
        { status: 400, path: /^\/api\/runs$/ },
        { status: 503, path: /^\/api\/runs\/[0-9A-Z]{26}\/iterations$/ },
      ],
    });
    stack = d.stack;
    page = d.page;
  });
  afterAll(async () => {
    await d?.close();
    await fake.stop();
  });
  const shot = (name: string) => d.shot(name);
  const textOf = (selector: string) => d.textOf(selector);
  const waitText = (selector: string, text: string, timeout?: number) =>
    d.waitText(selector, text, timeout);
  const submitForm = (preset: string, overrides?: Record<string, string>) =>
    d.submitForm(preset, overrides);
  const acceptNextDialog = () => d.acceptNextDialog();
  /** The exit shown for iteration `n`'s first validation command on the run page. */
  const validationExit = (n: number) =>
    page.locator(`#iterations li.iteration[data-n="${n}"] .validation .exit`).first().innerText();

  it("signs in with the token, submits a run through the form and shows it going live to succeeded", async () => {
    await page.goto(`${stack.url}/`);
    expect(new URL(page.url()).pathname).toBe("/login");
    await shot("login");
    await page.fill("#login-token", TOKEN);
    await page.click("#login-form button[type=submit]");
    await page.waitForURL(`${stack.url}/`);

    await page.click("#open-submit");
    await page.click('[data-preset="recovers"]');
    await page.fill('#submit-form [name="sessionId"]', "dash-recovers");
    await page.click("summary");
    await shot("submit-form");
    // Marks this document: the run must go live without a reload.
    await page.evaluate("window.sameDocument = true");
    await page.click("#submit-run");
    await page.waitForSelector("#notice:not([hidden])");
    const id = (await textOf("#notice a")).trim();
    expect(id).toMatch(/^[0-9A-Z]{26}$/);
    await waitText(`tr[data-id="${id}"] .badge`, "succeeded");
    expect(await page.evaluate("window.sameDocument")).toBe(true);
    expect(await textOf(`tr[data-id="${id}"]`)).toContain("dash-recovers");
    await shot("runs");

    await page.click(`tr[data-id="${id}"] a`);
    await page.waitForURL(`${stack.url}/runs/${id}`);
    await waitText("#run-status", "succeeded");
    await page.locator("#iterations li.iteration").nth(2).waitFor();
    expect(await page.locator("#iterations li.iteration").count()).toBe(3);
    await waitText("#events", "run_finished");
    expect(await textOf("#run-reason")).toContain("success");
    // Finished: what it used of each budget, nothing "left".
    expect(await textOf("#budget-iterations-text")).toBe("3 used of 5");
    expect(await textOf("#budget-time-text")).toMatch(/^\d\d:\d\d used of 05:00$/);
    expect(await textOf("#review")).toContain("No review");
    const first = page.locator('#iterations li.iteration[data-n="1"]');
    expect(await first.innerText()).toContain("validation failed");
    expect(await validationExit(1)).toBe("exit 1");
    expect(await validationExit(3)).toBe("exit 0");
    await first.locator(".validation summary").first().click();
    expect(await first.locator(".validation pre").first().innerText()).toContain("count is 1");
    await shot("run-succeeded");

    await page.click('[data-role="validation"]');
    const types = await Promise.all(
      (await page.locator("#events li").all()).map((li) => li.getAttribute("data-type")),
    );
    expect(types.length).toBe(3);
    expect(types.every((t) => t?.startsWith("validation_"))).toBe(true);
    await page.click('[data-role="all"]');
  });

  it("stops a running run from its page", async () => {
    const { id } = await submitForm("recovers", {
      agentCommand: "sleep 120",
      sessionId: "dash-stop",
    });
    expect(id).toBeDefined();
    await page.goto(`${stack.url}/runs/${id}`);
    await waitText("#run-status", "running");
    await page.locator("#stop-run:not([disabled])").waitFor();
    await shot("run-running");
    // It asks first: declined, nothing is sent and the run goes on.
    await page.click("#stop-run");
    expect(await page.isEnabled("#stop-run")).toBe(true);
    expect((await stack.api("GET", `/api/runs/${id}`, undefined, auth)).body.status).toBe(
      "running",
    );
    acceptNextDialog();
    await page.click("#stop-run");
    await waitText("#run-status", "stopped", 20_000);
    await waitText("#events", "stop_requested");
    expect(await textOf("#run-reason")).toContain("stopped");
    expect(await page.isDisabled("#stop-run")).toBe(true);
  });

  it("reads again what it could not read as the run finished (an API restarting), and catches up", async () => {
    const { id } = await submit(
      stack,
      {
        task: "three slow iterations",
        sessionId: "dash-catch-up",
        agent: { type: "command", command: "echo x >> lines; sleep 0.3" },
        testCommand: '[ "$(wc -l < lines)" -ge 3 ]',
        cooldownMs: 0,
      },
      auth,
    );
    // The page's reads of the iterations fail twice once the run is finished: the read that
    // its last events mark stale, and the next — what an API restarting at that moment answers.
    let failed = 0;
    let readAfter = 0;
    await page.route(`**/api/runs/${id}/iterations`, async (route) => {
      const run = await stack.api("GET", `/api/runs/${id}`, undefined, auth);
      if (run.body.status === "succeeded" && failed < 2) {
        failed++;
        await route.fulfill({
          status: 503,
          contentType: "application/json",
          body: JSON.stringify({ error: { code: "unavailable", message: "restarting" } }),
        });
        return;
      }
      if (failed === 2) readAfter++;
      await route.continue();
    });
    try {
      await page.goto(`${stack.url}/runs/${id}`);
      await waitText("#run-status", "succeeded", 20_000);
      // Nothing marks the iterations stale after the run's end: only the page's own retries
      // read them again (1 s, then 2 s later).
      await waitFor(() => failed === 2 && readAfter > 0, {
        timeoutMs: 10_000,
        message: `two failed reads of the iterations, and one after them (failed ${failed})`,
      });
      await page.locator("#run-error").waitFor({ state: "hidden" });
      expect(await page.locator("#iterations li.iteration").count()).toBe(3);
      expect(await validationExit(3)).toBe("exit 0");
    } finally {
      await page.unroute(`**/api/runs/${id}/iterations`);
    }
  });

  it("answers a blocked agent from the run page, twice: each reply reaches the next prompt", async () => {
    const QUESTION = "Which greeting should hello.txt hold?";
    const AGAIN = "Upper or lower case?";
    fake.reset();
    fake.replies(
      finish(QUESTION, "blocked"),
      finish(AGAIN, "blocked"),
      {
        toolCalls: [
          { name: "workspace__write_file", arguments: { path: "hello.txt", content: "hi\n" } },
        ],
      },
      finish("written"),
    );
    const created = await submit(
      stack,
      {
        task: "Write the greeting into hello.txt",
        sessionId: "dash-reply",
        agent: { type: "mistral", model: "mistral-small-latest" },
        testCommand: "grep -q hi hello.txt",
        cooldownMs: 0,
      },
      auth,
    );
    await page.goto(`${stack.url}/runs/${created.id}`);
    await waitText("#run-status", "awaiting approval");
    await page.locator("#reply-form:not([hidden])").waitFor();
    expect(await textOf("#approval-text")).toBe(QUESTION);
    expect(await page.isHidden("#approve-run")).toBe(true);
    await shot("run-blocked");
    await page.fill("#reply-message", "hi");
    await page.click("#reply-run");
    // The agent asks again: the same page (no reload) takes the second answer.
    await waitText("#approval-text", AGAIN);
    await page.locator("#reply-run:not([disabled])").waitFor();
    await page.fill("#reply-message", "lower case");
    await page.click("#reply-run");
    await waitText("#run-status", "succeeded", 30_000);
    await waitText("#events", "reply_received");
    expect(await page.locator('#events li.event[data-type="reply_received"]').count()).toBe(2);
    const userText = (i: number) =>
      fake.requests[i]?.messages
        .filter((m) => m.role === "user")
        .map((m) => String(m.content))
        .join("\n");
    expect(userText(1)).toContain("A person answered your question:\nhi");
    expect(userText(2)).toContain("A person answered your question:\nlower case");
  });

  it("runs the time-budget and legacy maxAttempts presets", async () => {
    const timed = await submitForm("time-budget", { sessionId: "dash-time" });
    const legacy = await submitForm("legacy-max-attempts", { sessionId: "dash-legacy" });
    expect(timed.id && legacy.id).toBeTruthy();
    await page.goto(`${stack.url}/runs/${legacy.id}`);
    await waitText("#run-status", "succeeded");
    expect(await textOf("#budget-iterations-text")).toBe("2 used of 3");

    await page.goto(`${stack.url}/runs/${timed.id}`);
    await waitText("#run-status", "failed", 40_000);
    expect(await textOf("#run-reason")).toContain("max_minutes");
    await waitText("#events", "budget_exhausted");
    await shot("run-time-budget");
  });

  it("shows the API's 400 in the form, naming the fields", async () => {
    const result = await submitForm("recovers", { task: "", agentCommand: "" });
    expect(result.error).toContain("400 invalid_request");
    expect(result.error).toMatch(/task/);
    expect(result.error).toMatch(/agent\.command/);
    await shot("submit-error");
    await page.click("#cancel-submit");
  });

  // Reviewers arrive with issue #4: until the API takes them, the form shows its 400.
  const reviewerPresets = [
    { preset: "review-approved", status: "succeeded", iterations: 1, highlight: "review_approved" },
    {
      preset: "review-sends-back",
      status: "succeeded",
      iterations: 2,
      highlight: "review_blocking_detected",
    },
    {
      preset: "persistent-blocking",
      status: "failed",
      iterations: 3,
      highlight: "review_blocking_detected",
    },
  ];
  for (const { preset, status, iterations, highlight } of reviewerPresets) {
    it(`runs the reviewer preset ${preset}, or shows why the API refuses it`, async () => {
      const result = await submitForm(preset, { sessionId: `dash-${preset}` });
      if (result.error !== undefined) {
        expect(result.error).toContain("400 invalid_request");
        expect(result.error).toMatch(/review/);
        return;
      }
      await page.goto(`${stack.url}/runs/${result.id}`);
      await waitText("#run-status", status, 45_000);
      await waitText("#events", "run_finished");
      // The timeline is read again in batches after events: wait for it to catch up.
      await page.locator(`#iterations li.iteration[data-n="${iterations}"]`).waitFor();
      expect(await page.locator("#iterations li.iteration").count()).toBe(iterations);
      expect(
        await page
          .locator(`#events li.event[data-type="${highlight}"]`)
          .first()
          .getAttribute("class"),
      ).toMatch(/hl-(good|bad)/);
      // The review section is read again once the events say a review was made.
      await page.locator("#review .score-num").waitFor();
      await page
        .locator(`#iterations li.iteration[data-n="${iterations}"] .it-head .badge`)
        .filter({ hasText: /passed|failed/ })
        .waitFor();
      const review = await textOf("#review");
      expect(await textOf("#review .score-num")).toMatch(/^\d+$/);
      expect(review).toContain("Blocking issues");
      expect(review).toContain("Fix plan");
      if (preset === "persistent-blocking") {
        expect(await textOf("#run-reason")).toContain("max_iterations");
        expect(review).toContain("add() ignores non-numbers");
        await waitText("#events", "budget_exhausted");
        expect(
          await page
            .locator('#events li.event[data-type="budget_exhausted"]')
            .getAttribute("class"),
        ).toContain("hl-warn");
        await shot("run-review-blocking");
      }
      if (preset === "review-approved") {
        const first = page.locator('#iterations li.iteration[data-n="1"]');
        await first.locator("summary", { hasText: "Review" }).click();
        expect(await first.innerText()).toContain("add a unit test");
        const diff = first.locator("summary", { hasText: "Diff" });
        if ((await diff.count()) > 0) {
          await diff.click();
          expect(await first.locator("pre.diff").innerText()).toContain("add.js");
        }
        await shot("run-review-approved");
      }
    });
  }

  it("filters the list by status and session, and pages through it", async () => {
    await page.goto(`${stack.url}/?limit=2`);
    const rows = page.locator("#runs-body tr.run-row");
    await rows.nth(1).waitFor();
    expect(await rows.count()).toBe(2);
    const firstPage = await rows.first().getAttribute("data-id");
    await page.click("#page-older");
    await page
      .locator(`#runs-body tr.run-row[data-id="${firstPage}"]`)
      .waitFor({ state: "detached" });
    expect(await page.textContent("#page-label")).toBe("page 2");
    const secondPage = await rows.first().getAttribute("data-id");
    // The page is in the address: a reload shows it again, the browser's Back the one before.
    expect(new URL(page.url()).searchParams.get("cursor")).toBeTruthy();
    await page.reload();
    await page.locator(`#runs-body tr.run-row[data-id="${secondPage}"]`).waitFor();
    expect(await page.locator(`#runs-body tr.run-row[data-id="${firstPage}"]`).count()).toBe(0);
    await page.goBack();
    await page.locator(`#runs-body tr.run-row[data-id="${firstPage}"]`).waitFor();
    expect(new URL(page.url()).search).toBe("?limit=2");
    await page.goForward();
    await page.locator(`#runs-body tr.run-row[data-id="${secondPage}"]`).waitFor();
    await page.click("#page-newer");
    await page.locator(`#runs-body tr.run-row[data-id="${firstPage}"]`).waitFor();
    expect(new URL(page.url()).search).toBe("?limit=2");

    // The form opened by the menu's "New run" (`/?new=1`) does not open again on a reload once closed.
    await page.goto(`${stack.url}/?new=1`);
    await page.locator("#submit-dialog[open]").waitFor();
    await page.click("#cancel-submit");
    // The dialog's close event, a moment after it closed, takes `new=1` out of the address.
    await page.waitForURL(`${stack.url}/`);
    await page.reload();
    await page.locator("#runs-body tr.run-row").first().waitFor();
    expect(await page.locator("#submit-dialog[open]").count()).toBe(0);

    await page.goto(`${stack.url}/`);
    await page.selectOption("#filter-status", "stopped");
    await page.locator("#runs-body tr.run-row").first().waitFor();
    await page
      .locator("#runs-body tr.run-row .badge", { hasNotText: "stopped" })
      .first()
      .waitFor({ state: "detached" });
    expect(await page.locator("#runs-body tr.run-row").count()).toBeGreaterThanOrEqual(1);
    expect(new URL(page.url()).search).toBe("?status=stopped");

    await page.selectOption("#filter-status", "");
    await page.fill("#filter-session", "dash-legacy");
    await page.press("#filter-session", "Enter");
    await page
      .locator("#runs-body tr.run-row", { hasNotText: "dash-legacy" })
      .first()
      .waitFor({ state: "detached" });
    expect(await page.locator("#runs-body tr.run-row").count()).toBe(1);
    await shot("runs-filtered");
  });

  it("keeps a filter chosen while the page's first lists are still on their way", async () => {
    // The unfiltered lists the page asks for when it opens (and again once its stream is
    // live) answer after the filtered one.
    const unfiltered = /\/api\/runs\?limit=20$/;
    const held: Promise<void>[] = [];
    await page.route(unfiltered, (route) => {
      const answered = (async () => {
        await new Promise((resolve) => setTimeout(resolve, 1000));
        await route.fulfill({ response: await route.fetch() });
      })();
      held.push(answered);
      return answered;
    });
    try {
      await page.goto(`${stack.url}/`);
      await page.selectOption("#filter-status", "stopped");
      await page.locator("#runs-body tr.run-row").first().waitFor();
      expect(held.length).toBeGreaterThanOrEqual(1);
      await Promise.all(held);
      // What the page does with a late answer, it does within a few turns of its loop.
      await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 300)));
      const badges = await page.locator("#runs-body tr.run-row .badge").allInnerTexts();
      expect(badges.length).toBeGreaterThanOrEqual(1);
      expect(new Set(badges)).toEqual(new Set(["stopped"]));
    } finally {
      await page.unroute(unfiltered);
    }
  });

  it("says a failed run's last feedback went to no next iteration, and shows output without colour codes", async () => {
    const { id } = await submit(
      stack,
      {
        task: "a test that fails in colour",
        sessionId: "dash-colour",
        agent: { type: "command", command: "true" },
        testCommand: "printf '\\033[31mFAIL\\033[0m in colour\\n'; exit 1",
        maxIterations: 2,
        cooldownMs: 0,
      },
      auth,
    );
    await page.goto(`${stack.url}/runs/${id}`);
    await waitText("#run-status", "failed");
    await page.locator('#iterations li.iteration[data-n="2"]').waitFor();
    const feedbackOf = (n: number) =>
      page
        .locator(`#iterations li.iteration[data-n="${n}"] summary`, { hasText: "Feedback" })
        .innerText();
    expect(await feedbackOf(1)).toBe("Feedback for the next iteration");
    expect(await feedbackOf(2)).toBe("Feedback (the run ended: no next iteration)");

    await page.goto(`${stack.url}/stats`);
    // The API keeps the error as printed; the page shows it without the escape sequences.
    const api = await stack.api("GET", "/api/stats/tools", undefined, auth);
    const learned = (api.body.patterns as { workspace: string; lastErrors: string[] }[]).find((p) =>
      p.workspace.endsWith("/dash-colour"),
    );
    expect(learned?.lastErrors[0]).toContain("\u001b[31m");
    const cell = page.locator('#patterns-body tr.pattern.failing td[title*="in colour"]');
    await cell.waitFor();
    expect(await cell.innerText()).toMatch(/^exit 1: FAIL in colour/);
    expect(await cell.getAttribute("title")).not.toContain("\u001b");
  });

  it("shows the statistics and what the runs so far learned", async () => {
    await page.goto(`${stack.url}/stats`);
    const row = page.locator("#patterns-body tr.pattern").first();
    await row.waitFor();
    // The runs above ran their validation commands: each is a learned pattern of its workspace.
    const cells = await row.locator("td").allInnerTexts();
    expect(cells[0]).toBe("command");
    expect(Number(cells[3]) + Number(cells[4])).toBeGreaterThan(0);
    const api = await stack.api("GET", "/api/stats/tools", undefined, auth);
    expect(await page.locator("#patterns-body tr.pattern").count()).toBe(api.body.patterns.length);
    // The blocked agent's write (a tool, by argument shape) and a check that failed before.
    const write = await page
      .locator('#patterns-body tr.pattern[data-subject="workspace.write_file"] td')
      .allInnerTexts();
    expect(write.slice(0, 5)).toEqual([
      "tool",
      "workspace.write_file {content:string,path:string}",
      "dash-reply",
      "1",
      "0",
    ]);
    expect(write[5]).toMatch(/^\d+ ms$/);
    const failing = await page.locator("#patterns-body tr.pattern.failing td").last().innerText();
    expect(failing).toMatch(/^exit \d+/);
    expect(await textOf("#convergence")).toContain("Success rate");
    await shot("stats");
  });

  it("raised no error in the page", () => {
    expect(d.pageErrors).toEqual([]);
  });
});
