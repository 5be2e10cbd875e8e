/** @jsxRuntime automatic @jsxImportSource hono/jsx */
import { Layout } from "./layout";

const ROLES = [
  ["all", "All"],
  ["agent", "Agent"],
  ["validation", "Validation"],
  ["reviewer", "Reviewer"],
  ["run", "Run"],
] as const;

/** A run's page: the skeleton; the script fills it from the API and keeps it live. */
export function RunPage({ auth, id }: { auth: boolean; id: string }) {
  return (
    <Layout title={`Run ${id}`} auth={auth} script="run.js">
      <div id="run-page" data-run-id={id}>
        <section class="card run-head">
          <div class="run-title">
            <a href="/" class="muted small">
              ← Runs
            </a>
            <h1 id="run-task">Run {id}</h1>
            <div class="muted small mono" id="run-meta">
              {id}
            </div>
          </div>
          <div class="run-state">
            <span aria-live="polite">
              <span class="badge" id="run-status">
                …
              </span>
            </span>
            <span class="live-dot" id="live-state" role="status">
              connecting…
            </span>
            <button type="button" class="danger" id="stop-run" disabled>
              Stop
            </button>
          </div>
          <p id="run-reason" class="reason" />
          <p id="run-progress" class="progress-line mono" />
          <p id="run-error" class="form-error" role="alert" hidden />
          <form id="rollback-form" class="rollback-form small">
            <label>
              Roll the workspace back to the snapshot after iteration{" "}
              <input type="number" id="rollback-iteration" min="0" value="0" required />
            </label>{" "}
            <button type="submit" id="rollback-run" disabled>
              Roll back
            </button>{" "}
            <span class="muted">
              (0: as before the run; only while the session has no active run)
            </span>
            <p id="rollback-result" class="muted mono" />
          </form>
          <p class="small">
            <button type="button" id="download-patch" disabled>
              Download the patch
            </button>{" "}
            <span class="muted">
              (the run's whole change, for <code>git apply</code>)
            </span>
          </p>
          <div id="approval" class="approval" hidden>
            <h2 id="approval-title">Waiting for you</h2>
            <pre id="approval-text" class="approval-text mono" />
            <form id="reply-form" class="reply-form" hidden>
              <textarea
                id="reply-message"
                aria-label="Your answer"
                rows={3}
                required
                placeholder="Your answer: the agent gets it as the next iteration's feedback"
              />
              <button type="submit" id="reply-run">
                Reply
              </button>
            </form>
            <div class="approval-actions">
              <button type="button" id="approve-run">
                Approve plan
              </button>{" "}
              <input
                type="text"
                id="reject-reason"
                aria-label="Why you reject the plan"
                placeholder="Why (for Reject)"
              />{" "}
              <button type="button" class="danger" id="reject-run">
                Reject
              </button>
            </div>
          </div>
        </section>
        <div class="columns">
          <div class="main-col">
            <section class="card" id="budget">
              <h2>Budget</h2>
              <div class="meter">
                <div class="meter-label">
                  <span>Iterations</span>
                  <span id="budget-iterations-text" />
                </div>
                <div class="bar">
                  <div class="fill" id="budget-iterations-bar" />
                </div>
              </div>
              <div class="meter">
                <div class="meter-label">
                  <span>Time</span>
                  <span id="budget-time-text" />
                </div>
                <div class="bar">
                  <div class="fill" id="budget-time-bar" />
                </div>
              </div>
            </section>
            <section class="card">
              <h2>Iterations</h2>
              <ol class="timeline" id="iterations">
                <li class="muted">No iteration yet.</li>
              </ol>
            </section>
          </div>
          <aside class="side-col">
            <section class="card" id="review">
              <h2>Review</h2>
              <div id="review-body" class="muted">
                No review
              </div>
            </section>
            <section class="card events-card">
              <h2>Events</h2>
              <div class="role-filter">
                {ROLES.map(([role, label]) => (
                  <button
                    type="button"
                    class={`chip${role === "all" ? " active" : ""}`}
                    aria-pressed={role === "all" ? "true" : "false"}
                    data-role={role}
                  >
                    {label}
                  </button>
                ))}
              </div>
              <ol class="events" id="events" />
            </section>
          </aside>
        </div>
      </div>
    </Layout>
  );
}
