/** @jsxRuntime automatic @jsxImportSource hono/jsx */
import { readdirSync, readFileSync } from "node:fs";
import { extname } from "node:path";
import type { RunRepositoryPort } from "@looprun/db";
import { type Context, Hono } from "hono";
import type { JSX } from "hono/jsx/jsx-runtime";
import { notFound } from "../errors";
import { PAGE_HEADERS } from "../security-headers";
import { requireDashboardCookie, safeNext, signIn, signOut, tokenMatches } from "./dashboard-auth";
import { Layout } from "./layout";
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

/** A page: HTML, with its content security policy, and no frame may hold it. */
const page = (c: Context, element: JSX.Element, status: 200 | 401 | 404 = 200) =>
  c.html(`<!doctype html>${element.toString()}`, status, PAGE_HEADERS);

/** What `/runs/:id` shows for an id no run has: a 404, as the API answers for it. */
function NoSuchRunPage({ auth, id }: { auth: boolean; id: string }) {
  return (
    <Layout title="No such run" auth={auth}>
      <section class="card" id="no-such-run">
        <h1>No such run</h1>
        <p>
          There is no run <span class="mono">{id}</span> on this looprun.{" "}
          <a href="/">See the runs</a>.
        </p>
      </section>
    </Layout>
  );
}

/** The dashboard: HTML pages (behind a cookie when API_TOKEN is set) and their assets. */
export function dashboardRoutes(
  apiToken: string | undefined,
  repo: Pick<RunRepositoryPort, "getRun">,
): Hono {
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
  app.get("/runs/:id", guard, async (c) => {
    const id = c.req.param("id");
    if ((await repo.getRun(id)) === null)
      return page(c, <NoSuchRunPage auth={auth} id={id} />, 404);
    return page(c, <RunPage auth={auth} id={id} />);
  });
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
