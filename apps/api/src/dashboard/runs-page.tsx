/** @jsxRuntime automatic @jsxImportSource hono/jsx */
import { RUN_STATUSES } from "@looprun/core";
import { Layout } from "./layout";
import type { Preset } from "./presets";
import { SubmitForm } from "./submit-form";

export function RunsPage({ auth, presets }: { auth: boolean; presets: Preset[] }) {
  return (
    <Layout title="Runs" auth={auth} script="runs.js">
      <section class="toolbar">
        <h1>Runs</h1>
        <span class="live-dot" id="live-state" title="live updates" role="status">
          connecting…
        </span>
        <div class="spacer" />
        <label class="inline">
          Status
          <select id="filter-status">
            <option value="">any</option>
            {RUN_STATUSES.map((s) => (
              <option value={s}>{s}</option>
            ))}
          </select>
        </label>
        <label class="inline">
          Session
          <input id="filter-session" placeholder="session id" size={18} />
        </label>
        <button type="button" class="primary" id="open-submit">
          New run
        </button>
      </section>
      <section class="card flush">
        <table class="runs" id="runs-table">
          <thead>
            <tr>
              <th>Status</th>
              <th>Task</th>
              <th>Session</th>
              <th class="num">Iteration</th>
              <th>Progress</th>
              <th class="num">Elapsed</th>
              <th class="num">Created</th>
            </tr>
          </thead>
          <tbody id="runs-body">
            <tr class="empty">
              <td colspan={7}>Loading…</td>
            </tr>
          </tbody>
        </table>
        <div class="pager">
          <button type="button" id="page-newer" disabled>
            ← Newer
          </button>
          <span id="page-label" class="muted">
            page 1
          </span>
          <button type="button" id="page-older" disabled>
            Older →
          </button>
        </div>
      </section>
      <p id="notice" class="notice" hidden />
      <SubmitForm presets={presets} />
    </Layout>
  );
}
