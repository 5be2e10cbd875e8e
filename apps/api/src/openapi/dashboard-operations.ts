import { missing, type OperationDoc } from "./operation-doc";

/** The dashboard's pages, its sign-in and its assets. */
export function dashboardOperations(): OperationDoc[] {
  const page = (path: string, summary: string): OperationDoc => ({
    method: "get",
    path,
    summary,
    tag: "dashboard",
    auth: "cookie",
    responses: {
      200: { description: "the page", media: "text/html" },
      302: { description: "to /login when API_TOKEN is set and the dashboard cookie is missing" },
    },
  });
  const runPage = page("/runs/:id", "Dashboard: one run, live");
  return [
    page("/", "Dashboard: runs, live"),
    {
      ...runPage,
      responses: {
        ...runPage.responses,
        404: { description: "no run has this id: a page that says so", media: "text/html" },
      },
    },
    page("/stats", "Dashboard: statistics across runs and what runs learned"),
    {
      method: "get",
      path: "/login",
      summary: "Dashboard sign-in form (when API_TOKEN is set)",
      tag: "dashboard",
      auth: "none",
      responses: {
        200: { description: "the form", media: "text/html" },
        302: { description: "without API_TOKEN there is nothing to sign in to: to `next` (or /)" },
      },
    },
    {
      method: "post",
      path: "/login",
      summary: "Sign in with the API token: sets the dashboard cookie",
      tag: "dashboard",
      auth: "none",
      responses: {
        303: { description: "signed in: back to the page asked for" },
        401: { description: "wrong token: the form again", media: "text/html" },
      },
    },
    {
      method: "post",
      path: "/logout",
      summary: "Sign out: clears the dashboard cookie",
      tag: "dashboard",
      auth: "none",
      responses: { 303: { description: "to /login" } },
    },
    {
      method: "get",
      path: "/dashboard/assets/:file",
      summary: "The dashboard's scripts and styles (served from the API, no CDN)",
      tag: "dashboard",
      auth: "none",
      responses: {
        200: { description: "a script or a stylesheet", media: "application/javascript" },
        404: missing,
      },
    },
  ];
}
