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

describe.skipIf(!chromiumAvailable)("dashboard in Chromium: many run pages open", () => {
  let d: Dashboard;
  let stack: Stack;
  beforeAll(async () => {
    d = await openDashboard(inject("redisUrl"), { env: { WORKER_CONCURRENCY: String(TABS) } });
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

  it(`keeps answering requests, and stops a run, with ${TABS} run pages following active runs`, async () => {
    const ids: string[] = [];
    for (let i = 0; i < TABS; i++) {
      const created = await stack.api(
        "POST",
        "/api/runs",
        {
          task: `Wait ${i}`,
          sessionId: `dash-tab-${i}`,
          agent: { type: "command", command: "sleep 120" },
          testCommand: "true",
        },
        auth,
      );
      expect(created.status).toBe(202);
      ids.push(created.body.id);
    }
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
    await first.click("#stop-run");
    await first.locator("#run-status").filter({ hasText: "stopped" }).waitFor({ timeout: 20_000 });
    expect(d.pageErrors).toEqual([]);
  });
});
