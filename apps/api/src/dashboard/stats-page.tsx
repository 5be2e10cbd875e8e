/** @jsxRuntime automatic @jsxImportSource hono/jsx */
import { Layout } from "./layout";

/** Statistics across runs: convergence, tools, and what runs learned (filled by stats.js). */
export function StatsPage({ auth }: { auth: boolean }) {
  return (
    <Layout title="Statistics" auth={auth} script="stats.js">
      <section class="toolbar">
        <h1>Statistics</h1>
        <div class="spacer" />
        <label class="inline">
          Workspace
          <input id="filter-workspace" placeholder="all workspaces" size={22} />
        </label>
      </section>
      <section class="card">
        <h2>Convergence</h2>
        <dl class="facts" id="convergence">
          <dt>Loading…</dt>
        </dl>
      </section>
      <section class="card flush">
        <h2>Tools</h2>
        <table class="runs" id="tools-table">
          <thead>
            <tr>
              <th>Tool</th>
              <th class="num">Calls</th>
              <th class="num">Failures</th>
              <th class="num">Success</th>
              <th class="num">Mean</th>
            </tr>
          </thead>
          <tbody id="tools-body" />
        </table>
      </section>
      <section class="card flush">
        <h2>Learned from earlier runs</h2>
        <p class="muted">
          Tools (by argument shape) and validation commands, per workspace: the mistral agent and
          the planner of the next run in a workspace are told what failed there and what worked.
        </p>
        <table class="runs" id="patterns-table">
          <thead>
            <tr>
              <th>Kind</th>
              <th>What</th>
              <th>Workspace</th>
              <th class="num">Succeeded</th>
              <th class="num">Failed</th>
              <th class="num">Mean</th>
              <th>Last error</th>
            </tr>
          </thead>
          <tbody id="patterns-body" />
        </table>
      </section>
      <p id="notice" class="notice" hidden />
    </Layout>
  );
}
