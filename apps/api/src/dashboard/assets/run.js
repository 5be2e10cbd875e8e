// One run, live: its events over SSE (GET /api/runs/:id/events/stream) — the page's one
// long-lived connection: a browser keeps at most 6 per host across its tabs (HTTP/1.1), so a
// second stream per page would let a few open run pages starve every other request. The run,
// its iterations, reviews and tool calls are read again when an event says they changed, and
// the run now and then while it is active (its progress line also changes between events).
import { ApiError, api, apiText, follow, optional } from "./api.js";
import { eventItem, roleOf } from "./events.js";
import { badge, clock, elapsedNow, h, isActive, timeBudgetLeft } from "./format.js";
import { iterationItem } from "./iterations.js";

const id = document.getElementById("run-page").dataset.runId;
const $ = (name) => document.getElementById(name);
const state = {
  run: null,
  readAt: 0,
  iterations: [],
  reviews: [],
  toolCalls: [],
  events: [],
  role: "all",
};
const diffs = new Map();

/**
 * The page's one error line. `from` says who put it there: a refused action's answer stays
 * until the next action, a failed read goes once a read succeeds again.
 */
function showError(text, from) {
  $("run-error").textContent = text;
  $("run-error").dataset.from = from;
  $("run-error").hidden = false;
}
function clearError(from) {
  if (from === undefined || $("run-error").dataset.from === from) $("run-error").hidden = true;
}
const actionFailed = (error) => showError(`${error.status ?? ""} ${error.message}`, "action");

/** What an event makes stale: the run always (status, progress, metrics), and what the type says. */
function staleAfter(type) {
  if (type === "tool_called") return ["run", "toolCalls"];
  if (type.startsWith("plan_") || type === "step_completed") return ["run"];
  if (type.startsWith("review_")) return ["reviews", "iterations", "run"];
  if (type.startsWith("run_") || type === "stop_requested" || type === "budget_exhausted") {
    return ["run", "iterations", "reviews", "toolCalls"];
  }
  return ["run", "iterations"];
}

/** How often an active run is read again without an event (its progress line changes between events). */
const RUN_REFRESH_MS = 3000;

function setRun(run) {
  state.run = run;
  state.readAt = Date.now();
  renderHead();
  renderBudget();
}

function renderHead() {
  const run = state.run;
  document.title = `${run.task.slice(0, 40)} · looprun`;
  $("run-task").textContent = run.task;
  $("run-meta").textContent =
    `${run.id} · session ${run.sessionId} · agent ${run.agent.type}${run.agent.command ? `: ${run.agent.command}` : ""}`;
  $("run-status").replaceWith(Object.assign(badge(run.status), { id: "run-status" }));
  $("run-reason").textContent = run.reason
    ? `${run.reason}${run.summary ? ` — ${run.summary}` : ""}`
    : "";
  // A finished run's progress line repeats its summary: shown once.
  const done = !isActive(run.status) && run.progress === run.summary;
  $("run-progress").textContent = done ? "" : (run.progress ?? "");
  $("stop-run").disabled = !isActive(run.status) || run.status === "stopping";
  $("rollback-run").disabled = isActive(run.status) || run.iteration === 0;
  $("rollback-iteration").max = String(run.iteration);
  $("download-patch").disabled = run.iteration === 0;
  renderApproval();
}

/** The plan to approve, or the blocked agent's question, with what a person can do about it. */
function renderApproval() {
  const run = state.run;
  const a = run.approval;
  $("approval").hidden = !(a && run.status === "awaiting_approval");
  if ($("approval").hidden) return;
  $("approval-title").textContent =
    a.kind === "plan" ? "The plan waits for your approval" : "The agent is blocked and asks";
  $("approval-text").textContent = (a.kind === "plan" ? a.plan : a.question) ?? "";
  $("approve-run").hidden = a.kind !== "plan";
  $("reply-form").hidden = a.kind !== "question";
}

async function answer(path, body, button) {
  button.disabled = true;
  clearError();
  try {
    const res = await api("POST", `/api/runs/${id}/${path}`, body);
    $("run-progress").textContent = `${path}: ${res.status}`;
  } catch (error) {
    actionFailed(error);
  }
  button.disabled = false;
  markStale(["run", "iterations"]);
}

/**
 * A budget's bar, warning (orange, then red) as it runs out while the run goes on, or when it
 * ended the run (`spentBy`: the reason it ends with); a run that ended otherwise used it calmly.
 */
function meter(bar, text, used, max, label, spentBy) {
  const pct = max > 0 ? Math.min(100, (used / max) * 100) : 0;
  const warn = isActive(state.run.status) || state.run.reason === spentBy;
  bar.style.width = `${pct}%`;
  bar.className = `fill${!warn ? "" : pct >= 100 ? " full" : pct >= 80 ? " high" : ""}`;
  text.textContent = label;
}

function renderBudget() {
  const { budget, metrics } = state.run;
  const used = metrics.iterations;
  // A finished run has nothing left to use: what it used of each budget.
  const over = !isActive(state.run.status);
  meter(
    $("budget-iterations-bar"),
    $("budget-iterations-text"),
    used,
    budget.maxIterations,
    over
      ? `${used} used of ${budget.maxIterations}`
      : `${used} used · ${Math.max(0, budget.maxIterations - used)} left of ${budget.maxIterations}`,
    "max_iterations",
  );
  const elapsed = elapsedNow(state.run, state.readAt);
  const max = budget.maxMinutes * 60_000;
  meter(
    $("budget-time-bar"),
    $("budget-time-text"),
    elapsed,
    max,
    over ? `${clock(elapsed)} used of ${clock(max)}` : timeBudgetLeft(elapsed, max),
    "max_minutes",
  );
}

function renderIterations() {
  const list = $("iterations");
  list.replaceChildren(
    ...(state.iterations.length === 0
      ? [h("li", { class: "muted" }, "No iteration yet.")]
      : state.iterations.map((it) =>
          iterationItem(it, {
            toolCalls: state.toolCalls,
            reviews: state.reviews,
            diffs,
            // The finished run's last iteration: its feedback went to no next one.
            last: it === state.iterations.at(-1) && !isActive(state.run?.status),
          }),
        )),
  );
}

function renderReview() {
  const box = $("review-body");
  const latest =
    state.reviews.find((r) => r.id === state.run?.latestReviewId) ?? state.reviews.at(-1);
  if (!latest) {
    box.className = "muted";
    box.replaceChildren("No review");
    return;
  }
  const list = (title, items, cls) =>
    h(
      "div",
      { class: `issues ${cls}` },
      h("h3", {}, `${title} (${items.length})`),
      items.length
        ? h(
            "ul",
            {},
            items.map((i) => h("li", {}, i)),
          )
        : h("p", { class: "muted small" }, "none"),
    );
  box.className = "";
  box.replaceChildren(
    h(
      "div",
      { class: "score" },
      h("span", { class: "score-num" }, String(latest.score)),
      h("span", { class: "muted" }, " / 100"),
      h(
        "span",
        { class: "muted small" },
        ` · iteration ${latest.iteration} · ${state.reviews.length} review(s)`,
      ),
    ),
    list("Blocking issues", latest.blockingIssues, "blocking"),
    list("Non-blocking issues", latest.nonBlockingIssues, "non-blocking"),
    h(
      "div",
      { class: "fix-plan" },
      h("h3", {}, "Fix plan"),
      latest.fixPlan.length
        ? h(
            "ol",
            {},
            latest.fixPlan.map((s) => h("li", {}, s)),
          )
        : h("p", { class: "muted small" }, "none"),
    ),
  );
}

function renderEvents() {
  const shown = state.events.filter((e) => state.role === "all" || roleOf(e.type) === state.role);
  $("events").replaceChildren(...shown.slice().reverse().map(eventItem));
}

async function loadDiffs() {
  for (const it of state.iterations) {
    const key = `${it.n}.${it.attempt}`;
    // No snapshot (yet: its rows may come a moment after the decision), no diff to ask for.
    if (it.status === "running" || !it.snapshot || diffs.has(key)) continue;
    diffs.set(key, null);
    const text = await optional(`/api/runs/${id}/iterations/${it.n}/diff`);
    if (text) {
      diffs.set(key, text);
      renderIterations();
    }
  }
}

const READ = {
  run: async () => setRun(await api("GET", `/api/runs/${id}`)),
  iterations: async () => {
    state.iterations = (await api("GET", `/api/runs/${id}/iterations`)).items;
  },
  reviews: async () => {
    state.reviews = (await api("GET", `/api/runs/${id}/reviews`)).items;
  },
  toolCalls: async () => {
    state.toolCalls = (await api("GET", `/api/runs/${id}/tool-calls`)).items;
  },
};
const stale = new Set();
let reloadTimer = null;
let reloading = false;
/** The pause before reading again what a failed read left stale (0: none failed). */
let retryMs = 0;

/** A failure that reading again may mend: no answer at all (a restarting API), a 5xx, a 429. */
const passing = (error) =>
  !(error instanceof ApiError) || error.status >= 500 || error.status === 429;

// Reads what is stale at most every 300 ms, however fast the events come.
async function reload() {
  reloadTimer = null;
  if (stale.size === 0) return;
  reloading = true;
  const parts = [...stale];
  stale.clear();
  try {
    await Promise.all(parts.map((part) => READ[part]()));
    retryMs = 0;
    clearError("read");
    renderIterations();
    renderReview();
    loadDiffs();
  } catch (error) {
    // Read again, backing off to 10 s: the run's last reads come as it finishes, when no
    // event will mark them stale again — the page would keep what it had before.
    if (passing(error)) {
      for (const part of parts) stale.add(part);
      retryMs = Math.min(retryMs === 0 ? 1000 : retryMs * 2, 10_000);
    }
    showError(
      error instanceof ApiError && error.status === 404 ? `No run ${id}.` : error.message,
      "read",
    );
  } finally {
    reloading = false;
    if (stale.size > 0) reloadTimer = setTimeout(reload, retryMs || 300);
  }
}
function markStale(parts) {
  for (const part of parts) stale.add(part);
  if (reloadTimer === null && !reloading) reloadTimer = setTimeout(reload, 300);
}

let eventsFrame = 0;
function scheduleEvents() {
  if (eventsFrame !== 0) return;
  eventsFrame = requestAnimationFrame(() => {
    eventsFrame = 0;
    renderEvents();
  });
}

/** Adds an event once, in `seq` order (the stream and the list may both deliver it). */
function addEvent(event) {
  if (state.events.some((e) => e.seq === event.seq)) return false;
  const last = state.events.at(-1);
  state.events.push(event);
  if (last && last.seq > event.seq) state.events.sort((a, b) => a.seq - b.seq);
  scheduleEvents();
  return true;
}

/**
 * Events written after `run_finished` (rollbacks of the finished run): this page stops reading
 * the stream at `run_finished`, and a rollback made from it comes later; the list has them.
 */
async function readLateEvents() {
  const after = state.events.reduce((max, e) => Math.max(max, e.seq), 0);
  try {
    const page = await api("GET", `/api/runs/${id}/events?after=${after}`);
    for (const event of page.items) addEvent(event);
  } catch {
    // The next rollback (or a reload) reads them again.
  }
}

for (const chip of document.querySelectorAll("[data-role]")) {
  chip.addEventListener("click", () => {
    state.role = chip.dataset.role;
    for (const c of document.querySelectorAll("[data-role]")) {
      c.classList.toggle("active", c === chip);
      c.setAttribute("aria-pressed", String(c === chip));
    }
    renderEvents();
  });
}

$("stop-run").addEventListener("click", async () => {
  // As final as a rejection: its processes are killed and the run ends `stopped`.
  if (!confirm("Stop this run? Its commands are killed and it ends stopped.")) return;
  $("stop-run").disabled = true;
  clearError();
  try {
    const res = await api("POST", `/api/runs/${id}/stop`);
    $("run-progress").textContent = `stop requested: ${res.status}`;
  } catch (error) {
    actionFailed(error);
  }
  markStale(["run", "iterations"]);
});

$("approve-run").addEventListener("click", () => answer("approve", {}, $("approve-run")));
$("reject-run").addEventListener("click", () => {
  const reason = $("reject-reason").value.trim() || "rejected from the dashboard";
  if (!confirm("Reject and end the run (stopped)?")) return;
  answer("reject", { reason }, $("reject-run"));
});
$("reply-form").addEventListener("submit", (event) => {
  event.preventDefault();
  answer("reply", { message: $("reply-message").value }, $("reply-run"));
});

$("download-patch").addEventListener("click", async () => {
  clearError();
  try {
    const url = URL.createObjectURL(
      new Blob([await apiText(`/api/runs/${id}/patch`)], { type: "text/x-diff" }),
    );
    const link = h("a", { href: url, download: `looprun-${id}.patch`, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  } catch (error) {
    actionFailed(error);
  }
});

$("rollback-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const iteration = Number($("rollback-iteration").value);
  const where = iteration === 0 ? "as it was before the run" : `as after iteration ${iteration}`;
  if (!confirm(`Restore the workspace ${where}? Changes made since are replaced.`)) return;
  $("rollback-run").disabled = true;
  clearError();
  try {
    const res = await api("POST", `/api/runs/${id}/rollback`, { iteration });
    $("rollback-result").textContent =
      `restored ${where}: ${res.files.length} file(s) changed back` +
      (res.files.length > 0
        ? ` (${res.files.map((f) => `${f.change} ${f.path}`).join(", ")})`
        : "");
  } catch (error) {
    actionFailed(error);
  }
  $("rollback-run").disabled = false;
  markStale(["run"]);
  await readLateEvents();
});

setInterval(() => {
  // A hidden page reads nothing: shown again, it follows its events from where it left off.
  if (document.visibilityState === "hidden") return;
  if (!state.run || !isActive(state.run.status)) return;
  renderBudget();
  if (Date.now() - state.readAt >= RUN_REFRESH_MS) markStale(["run"]);
}, 1000);

for (const part of Object.keys(READ)) stale.add(part);
await reload();
const liveState = $("live-state");
follow(`/api/runs/${id}/events/stream`, {
  onEvent(type, event) {
    if (!addEvent(event)) return;
    markStale(staleAfter(type));
    if (type === "run_finished") {
      readLateEvents();
      return "stop";
    }
  },
  onState(s) {
    liveState.textContent = s === "ended" ? "finished" : s;
    liveState.classList.toggle("on", s === "live");
  },
});
