/** @jsxRuntime automatic @jsxImportSource hono/jsx */
import { readdirSync, readFileSync } from "node:fs";
import { extname } from "node:path";
import { type Context, Hono } from "hono";
import type { JSX } from "hono/jsx/jsx-runtime";
import { notFound } from "../errors";
import { requireDashboardCookie, safeNext, signIn, signOut, tokenMatches } from "./dashboard-auth";
import { LoginPage } from "./login-page";
import { PRESETS } from "./presets";
import { RunPage } from "./run-page";
import { RunsPage } from "./runs-page";
import { StatsPage } from "./stats-page";

const TYPES: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
};

/** The scripts and styles, read once: they ship in the repository, nothing comes from a CDN. */
function loadAssets(): Map<string, { body: string; type: string }> {
  const dir = new URL("./assets/", import.meta.url);
  const assets = new Map<string, { body: string; type: string }>();
  for (const name of readdirSync(dir)) {
    const type = TYPES[extname(name)];
    if (type) assets.set(name, { body: readFileSync(new URL(name, dir), "utf8"), type });
  }
  return assets;
}

const page = (c: Context, element: JSX.Element, status: 200 | 401 = 200) =>
  c.html(`<!doctype html>${element.toString()}`, status);

/** The dashboard: HTML pages (behind a cookie when API_TOKEN is set) and their assets. */
export function dashboardRoutes(apiToken: string | undefined): Hono {
  const app = new Hono();
  const assets = loadAssets();
  const auth = apiToken !== undefined;
  const guard = requireDashboardCookie(apiToken);

  app.get("/dashboard/assets/:file", (c) => {
    const asset = assets.get(c.req.param("file"));
    if (!asset) throw notFound(`asset ${c.req.param("file")}`);
    return c.body(asset.body, 200, { "content-type": asset.type, "cache-control": "no-cache" });
  });

  app.get("/", guard, (c) => page(c, <RunsPage auth={auth} presets={PRESETS} />));
  app.get("/runs/:id", guard, (c) => page(c, <RunPage auth={auth} id={c.req.param("id")} />));
  app.get("/stats", guard, (c) => page(c, <StatsPage auth={auth} />));

  app.get("/login", (c) => {
    const next = safeNext(c.req.query("next"));
    if (!apiToken) return c.redirect(next, 302);
    return page(c, <LoginPage next={next} />);
  });
  app.post("/login", async (c) => {
    const form = await c.req.parseBody();
    const next = safeNext(typeof form.next === "string" ? form.next : undefined);
    if (!apiToken) return c.redirect(next, 303);
    const given = typeof form.token === "string" ? form.token : "";
    if (!tokenMatches(given, apiToken)) {
      return page(
        c,
        <LoginPage next={next} error="That token is not the API_TOKEN of this API." />,
        401,
      );
    }
    signIn(c, apiToken);
    return c.redirect(next, 303);
  });
  app.post("/logout", (c) => {
    signOut(c);
    return c.redirect(apiToken ? "/login" : "/", 303);
  });
  return app;
}
