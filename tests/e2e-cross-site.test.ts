import { existsSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { chromiumAvailable, type Dashboard, openDashboard } from "./support/dashboard-browser";
import { freePort } from "./support/redis-server";

// Cross-site request forgery, in Chromium: without API_TOKEN a local looprun trusts its local
// clients, and a page of any site the user opens can make the browser POST to 127.0.0.1. It
// must not get a run (a command of its choosing) accepted; the dashboard, same-origin, still can.

/** The page of another site: three ways a page sends a POST without asking the API first. */
function attackerPage(api: string, marker: string): string {
  const run = {
    task: "csrf",
    sessionId: "csrf",
    agent: { type: "command", command: `touch ${marker}` },
    testCommand: "true",
  };
  const json = JSON.stringify(run);
  // A text/plain form posts `name=value`: the JSON ends in a field that swallows the `=`.
  const formName = `${json.slice(0, -1)},"requirements":"`;
  const attr = (s: string) => s.replaceAll("&", "&amp;").replaceAll("'", "&#39;");
  return `<!doctype html><html><body>
<iframe name="sink" id="sink"></iframe>
<form id="form" method="post" enctype="text/plain" target="sink" action="${api}/api/runs">
  <input name='${attr(formName)}' value='"}'>
</form>
<script>
(async () => {
  const body = ${JSON.stringify(json)};
  await fetch(${JSON.stringify(`${api}/api/runs`)}, {
    method: "POST", mode: "no-cors", headers: { "content-type": "text/plain" }, body,
  }).catch(() => {});
  await fetch(${JSON.stringify(`${api}/api/runs`)}, {
    method: "POST", mode: "no-cors", body: new TextEncoder().encode(body),
  }).catch(() => {});
  const sink = document.getElementById("sink");
  sink.addEventListener("load", () => { document.title = "sent"; }, { once: true });
  document.getElementById("form").submit();
})();
</script></body></html>`;
}

describe.skipIf(!chromiumAvailable)("a page of another site, looprun without API_TOKEN", () => {
  let d: Dashboard;
  let site: Server;
  let siteUrl = "";
  beforeAll(async () => {
    d = await openDashboard(inject("redisUrl"), {
      env: { API_TOKEN: "" },
      expectedErrors: [{ status: 403, path: /^\/api\/runs$/ }],
    });
    const marker = join(d.stack.dir, "csrf-ran");
    const port = await freePort();
    site = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/html" });
      res.end(attackerPage(d.stack.url, marker));
    });
    await new Promise<void>((listening) => site.listen(port, "127.0.0.1", listening));
    // Another host name than the API's 127.0.0.1: another site to the browser.
    siteUrl = `http://localhost:${port}/`;
  });
  afterAll(async () => {
    await d?.close();
    site?.closeAllConnections();
    await new Promise<void>((closed) => (site ? site.close(() => closed()) : closed()));
  });

  it("gets nothing accepted by its form or its fetches; the dashboard's own requests pass", async () => {
    const refused: number[] = [];
    d.page.on("response", (res) => {
      if (res.url() === `${d.stack.url}/api/runs` && res.request().method() === "POST") {
        refused.push(res.status());
      }
    });
    await d.page.goto(siteUrl);
    await d.page.waitForFunction('document.title === "sent"', undefined, { timeout: 15_000 });
    // The form's answer, shown in its frame: the refusal, naming where the request came from.
    const answer = await d.page.frameLocator("#sink").locator("body").innerText();
    expect(JSON.parse(answer).error).toMatchObject({ code: "forbidden" });
    expect(answer).toContain(new URL(siteUrl).origin);
    expect(refused).toEqual([403, 403, 403]);
    const runs = await d.stack.api("GET", "/api/runs");
    expect(runs.body.items).toEqual([]);
    expect(existsSync(join(d.stack.dir, "csrf-ran"))).toBe(false);

    // The dashboard's page (same origin) submits as before.
    await d.page.goto(`${d.stack.url}/`);
    const own = await d.page.evaluate(async () => {
      const res = await fetch("/api/runs", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          task: "from the dashboard",
          agent: { type: "command", command: "true" },
          testCommand: "true",
        }),
      });
      return res.status;
    });
    expect(own).toBe(202);
  });

  it("answers nothing addressed to another host name (DNS rebinding), to looprun api itself", async () => {
    // A page of rebind.test, the name re-pointed at 127.0.0.1: its browser sends that name.
    const { port } = new URL(d.stack.url);
    const asked = (host: string) =>
      new Promise<number>((answered, failed) => {
        const req = request({ host: "127.0.0.1", port, path: "/api/runs", headers: { host } });
        req.on("response", (res) => {
          res.resume();
          answered(res.statusCode ?? 0);
        });
        req.on("error", failed);
        req.end();
      });
    expect(await asked(`rebind.test:${port}`)).toBe(403);
    expect(await asked(`localhost:${port}`)).toBe(200);
  });
});
