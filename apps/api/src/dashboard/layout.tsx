/** @jsxRuntime automatic @jsxImportSource hono/jsx */
// The pragma keeps JSX working when the CLI runs from a directory without this tsconfig.
import type { Child } from "hono/jsx";

export const ASSETS = "/dashboard/assets";

export interface LayoutProps {
  title: string;
  /** Whether API_TOKEN is set (the scripts then send the token they keep). */
  auth: boolean;
  /** No navigation (the sign-in page). */
  bare?: boolean;
  /** The page's script module under /dashboard/assets. */
  script?: string;
  children?: Child;
}

export function Layout({ title, auth, bare, script, children }: LayoutProps) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{title} · looprun</title>
        <link rel="stylesheet" href={`${ASSETS}/style.css`} />
        <link rel="stylesheet" href={`${ASSETS}/run.css`} />
        <link rel="icon" href="data:," />
      </head>
      <body data-auth={auth ? "on" : "off"}>
        <header class="topbar">
          <a class="brand" href="/">
            <span class="logo">↻</span> looprun
          </a>
          <nav hidden={bare}>
            <a href="/">Runs</a>
            <a href="/stats">Statistics</a>
            <a href="/?new=1" id="nav-new-run">
              New run
            </a>
            {auth ? null : (
              <>
                <a href="/api/openapi.json">API</a>
                <a href="/metrics">Metrics</a>
              </>
            )}
          </nav>
          {auth && !bare ? (
            <form method="post" action="/logout" class="signout" id="signout">
              <button type="submit" class="link">
                Sign out
              </button>
            </form>
          ) : null}
        </header>
        <main>{children}</main>
        {script ? <script type="module" src={`${ASSETS}/${script}`} /> : null}
      </body>
    </html>
  );
}
