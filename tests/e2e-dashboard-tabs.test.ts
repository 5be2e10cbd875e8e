import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  auth,
  chromiumAvailable,
  type Dashboard,
  openDashboard,
  TOKEN,
} from "./support/dashboard-browser";
import type { Stack } from "./support/stack";

// Several run pages open at once in one browser: the API speaks HTTP/1.1 and Chromium keeps at
// most 6 connections per host across its tabs, so each page may hold only one long-lived
// stream, or a few open pages leave no connection for anything else (the Stop button included).

const TABS = 5;
/** More pages than the browser has connections for the host: only the shown one may stream. */
const MANY = 8;

describe.skipIf(!chromiumAvailable)("dashboard in Chromium: many run pages open", () => {
  let d: Dashboard;
  let stack: Stack;
  beforeAll(async () => {
    d = await openDashboard(inject("redisUrl"), { env: { WORKER_CONCURRENCY: String(MANY) } });
    await d.signIn();
    stack = d.stack;
  });
  afterAll(async () => {
    await d?.close();
  });

  /** Resolves with what a fetch from `page` got within 5 s: "200", or "no answer". */
  const fetchFrom = (page: Page, path: string) =>
    page.evaluate(
      async ({ path, token }) => {
        const controller = new AbortController();
        const timer = setTimeout(() => controller.abort(), 5000);
        try {
          const res = await fetch(path, {
            signal: controller.signal,
            headers: { authorization: `Bearer ${token}` },
          });
          return String(res.status);
        } catch {
          return "no answer";
        } finally {
          clearTimeout(timer);
        }
      },
      { path, token: TOKEN },
    );

  /** `count` runs that wait (an agent sleeping two minutes), each in its own session. */
  const waitingRuns = async (count: number, label: string) => {
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const created = await stack.api(
        "POST",
        "/api/runs",
        {
          task: `Wait ${i}`,
          sessionId: `dash-${label}-${i}`,
          agent: { type: "command", command: "sleep 120" },
          testCommand: "true",
        },
        auth,
      );
      expect(created.status).toBe(202);
      ids.push(created.body.id);
    }
    return ids;
  };

  /**
   * What the browser does when a tab goes to the background or comes back: headless Chromium
   * shows every page, so the page is told, as a browser tells it (the visibility state and its
   * `visibilitychange` event).
   */
  const setHidden = (page: Page, hidden: boolean) =>
    page.evaluate(`(() => {
      Object.defineProperty(document, "visibilityState", {
        configurable: true,
        get: () => "${hidden ? "hidden" : "visible"}",
      });
      Object.defineProperty(document, "hidden", { configurable: true, get: () => ${hidden} });
      document.dispatchEvent(new Event("visibilitychange"));
    })()`);

  it(`keeps answering requests, and stops a run, with ${TABS} run pages following active runs`, async () => {
    const ids = await waitingRuns(TABS, "tab");
    const pages: Page[] = [d.page];
    for (let i = 1; i < TABS; i++) pages.push(await d.page.context().newPage());
    for (const [i, page] of pages.entries()) {
      await page.goto(`${stack.url}/runs/${ids[i]}`);
      await page.locator("#live-state").filter({ hasText: "live" }).waitFor();
      await page.locator("#run-status").filter({ hasText: "running" }).waitFor();
    }

    const first = pages[0] as Page;
    expect(await fetchFrom(first, "/api/runs?limit=1")).toBe("200");
    expect(await fetchFrom(pages[TABS - 1] as Page, `/api/runs/${ids[0]}`)).toBe("200");

    await first.locator("#stop-run:not([disabled])").waitFor();
    first.once("dialog", (dialog) => void dialog.accept());
    await first.click("#stop-run");
    await first.locator("#run-status").filter({ hasText: "stopped" }).waitFor({ timeout: 20_000 });
    expect(d.pageErrors).toEqual([]);
    for (const page of pages.slice(1)) await page.close();
    for (const id of ids.slice(1)) {
      expect((await stack.api("POST", `/api/runs/${id}/stop`, {}, auth)).status).toBe(202);
    }
  });

  it(`lets ${MANY} run pages follow active runs: hidden pages give their connection back and catch up when shown`, async () => {
    const ids = await waitingRuns(MANY, "many");
    const pages: Page[] = [];
    for (const [i, id] of ids.entries()) {
      const page = await d.page.context().newPage();
      pages.push(page);
      await page.goto(`${stack.url}/runs/${id}`);
      await page.locator("#live-state").filter({ hasText: "live" }).waitFor();
      await page.locator("#run-status").filter({ hasText: "running" }).waitFor();
      // Every page but the last goes to the background once it has shown its run.
      if (i < MANY - 1) {
        await setHidden(page, true);
        await page.locator("#live-state").filter({ hasText: "paused" }).waitFor();
      }
    }
    const shown = pages[MANY - 1] as Page;
    expect(await fetchFrom(shown, `/api/runs/${ids[0]}`)).toBe("200");

    // The first page's run ends while the page is hidden; shown again, the page follows its
    // events from the last one it had, and so learns the run was stopped.
    const first = pages[0] as Page;
    expect((await stack.api("POST", `/api/runs/${ids[0]}/stop`, {}, auth)).status).toBe(202);
    await expect
      .poll(
        async () => (await stack.api("GET", `/api/runs/${ids[0]}`, undefined, auth)).body.status,
        {
          timeout: 20_000,
        },
      )
      .toBe("stopped");
    expect(await first.locator("#run-status").textContent()).toContain("running");
    await setHidden(first, false);
    await first.locator("#run-status").filter({ hasText: "stopped" }).waitFor({ timeout: 20_000 });
    await first.locator("#live-state").filter({ hasText: "finished" }).waitFor();
    expect(await fetchFrom(shown, "/api/runs?limit=1")).toBe("200");
    for (const id of ids.slice(1)) {
      expect((await stack.api("POST", `/api/runs/${id}/stop`, {}, auth)).status).toBe(202);
    }
    for (const page of pages) await page.close();
  });
});
