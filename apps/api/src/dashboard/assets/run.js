// One run, live: its events over SSE (GET /api/runs/:id/events/stream) and its changes over the
// runs stream; iterations, reviews and tool calls are read again when an event says they changed.
import { ApiError, api, follow, optional } from "./api.js";
import { eventItem, roleOf } from "./events.js";
import { badge, clock, duration, elapsedNow, h, isActive, time } from "./format.js";

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
const openDetails = new Set();

const REFRESH_ON = new Set([
  "run_started",
  "run_resumed",
  "iteration_started",
  "agent_finished",
  "tool_called",
  "validation_passed",
  "validation_failed",
  "review_approved",
  "review_blocking_detected",
  "phase_failed",
  "budget_exhausted",
  "cooldown_started",
  "stop_requested",
  "run_finished",
  "plan_created",
  "plan_updated",
  "step_completed",
]);

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
  $("run-progress").textContent = run.progress ?? "";
  $("stop-run").disabled = !isActive(run.status) || run.status === "stopping";
}

function meter(bar, text, used, max, label) {
  const pct = max > 0 ? Math.min(100, (used / max) * 100) : 0;
  bar.style.width = `${pct}%`;
  bar.className = `fill${pct >= 100 ? " full" : pct >= 80 ? " high" : ""}`;
  text.textContent = label;
}

function renderBudget() {
  const { budget, metrics } = state.run;
  const used = metrics.iterations;
  meter(
    $("budget-iterations-bar"),
    $("budget-iterations-text"),
    used,
    budget.maxIterations,
    `${used} used · ${Math.max(0, budget.maxIterations - used)} left of ${budget.maxIterations}`,
  );
  const elapsed = elapsedNow(state.run, state.readAt);
  const max = budget.maxMinutes * 60_000;
  meter(
    $("budget-time-bar"),
    $("budget-time-text"),
    elapsed,
    max,
    `${clock(elapsed)} elapsed · ${clock(Math.max(0, max - elapsed))} left of ${clock(max)}`,
  );
}

function details(key, summary, content, { open = false, cls = "" } = {}) {
  const el = h(
    "details",
    { class: cls, open: openDetails.has(key) || open },
    h("summary", {}, summary),
    content,
  );
  el.addEventListener("toggle", () => (el.open ? openDetails.add(key) : openDetails.delete(key)));
  return el;
}

const exit = (code) =>
  h("span", { class: `exit ${code === 0 ? "ok" : "bad"}` }, `exit ${code ?? "—"}`);

function diffView(text) {
  return h(
    "pre",
    { class: "diff mono" },
    text.split("\n").map((line) =>
      h(
        "span",
        {
          class: line.startsWith("+")
            ? "add"
            : line.startsWith("-")
              ? "del"
              : line.startsWith("@@")
                ? "hunk"
                : "",
        },
        `${line}\n`,
      ),
    ),
  );
}

function iterationItem(it) {
  const key = `${it.n}.${it.attempt}`;
  const calls = state.toolCalls.filter((c) => c.iteration === it.n);
  const failedCalls = calls.filter((c) => c.isError).length;
  const took = it.finishedAt
    ? duration(Date.parse(it.finishedAt) - Date.parse(it.startedAt))
    : "running…";
  const diff = diffs.get(key);
  return h(
    "li",
    { class: `iteration it-${it.status}`, dataset: { n: String(it.n) } },
    h(
      "div",
      { class: "it-head" },
      h("strong", {}, `Iteration ${it.n}`),
      it.attempt > 1 ? h("span", { class: "muted" }, ` attempt ${it.attempt}`) : null,
      badge(it.status),
      it.outcome ? h("span", { class: "outcome" }, it.outcome.replaceAll("_", " ")) : null,
      h("span", { class: "muted small" }, `${time(it.startedAt)} · ${took}`),
    ),
    it.agent
      ? details(
          `${key}.agent`,
          h("span", {}, "Agent ", exit(it.agent.exitCode), ` · ${duration(it.agent.durationMs)}`),
          h("pre", { class: "output mono" }, it.agent.output || "(no output)"),
        )
      : h("div", { class: "muted small" }, "agent running…"),
    it.validation.length > 0
      ? h(
          "div",
          { class: "validation" },
          it.validation.map((v, i) =>
            details(
              `${key}.v${i}`,
              h(
                "span",
                {},
                exit(v.exitCode),
                " ",
                h("code", {}, v.command),
                ` · ${duration(v.durationMs)}`,
              ),
              h("pre", { class: "output mono" }, v.output || "(no output)"),
            ),
          ),
        )
      : null,
    calls.length > 0
      ? details(
          `${key}.tools`,
          `Tool calls: ${calls.length}${failedCalls ? `, ${failedCalls} failed` : ""}`,
          h(
            "ul",
            { class: "tool-calls" },
            calls.map((c) =>
              h(
                "li",
                { class: c.isError ? "bad" : "" },
                h("code", {}, `${c.server}.${c.tool}`),
                ` ${duration(c.durationMs)} `,
                h("span", { class: "muted small" }, JSON.stringify(c.args).slice(0, 160)),
              ),
            ),
          ),
        )
      : null,
    diff ? details(`${key}.diff`, "Diff", diffView(diff)) : null,
    it.feedback
      ? details(
          `${key}.feedback`,
          "Feedback for the next iteration",
          h("pre", { class: "output mono" }, it.feedback),
        )
      : null,
  );
}

function renderIterations() {
  const list = $("iterations");
  list.replaceChildren(
    ...(state.iterations.length === 0
      ? [h("li", { class: "muted" }, "No iteration yet.")]
      : state.iterations.map(iterationItem)),
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
    if (it.status === "running" || diffs.has(key)) continue;
    diffs.set(key, null);
    const text = await optional(`/api/runs/${id}/iterations/${it.n}/diff`);
    if (text) {
      diffs.set(key, text);
      renderIterations();
    }
  }
}

let refreshTimer = null;
async function refresh() {
  try {
    const [run, its, reviews, calls] = await Promise.all([
      api("GET", `/api/runs/${id}`),
      api("GET", `/api/runs/${id}/iterations`),
      api("GET", `/api/runs/${id}/reviews`),
      api("GET", `/api/runs/${id}/tool-calls`),
    ]);
    state.iterations = its.items;
    state.reviews = reviews.items;
    state.toolCalls = calls.items;
    setRun(run);
    renderIterations();
    renderReview();
    loadDiffs();
  } catch (error) {
    $("run-error").textContent =
      error instanceof ApiError && error.status === 404 ? `No run ${id}.` : error.message;
    $("run-error").hidden = false;
  }
}
const scheduleRefresh = () => {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(refresh, 120);
};

for (const chip of document.querySelectorAll("[data-role]")) {
  chip.addEventListener("click", () => {
    state.role = chip.dataset.role;
    for (const c of document.querySelectorAll("[data-role]"))
      c.classList.toggle("active", c === chip);
    renderEvents();
  });
}

$("stop-run").addEventListener("click", async () => {
  $("stop-run").disabled = true;
  try {
    const res = await api("POST", `/api/runs/${id}/stop`);
    $("run-progress").textContent = `stop requested: ${res.status}`;
  } catch (error) {
    $("run-error").textContent = `${error.status ?? ""} ${error.message}`;
    $("run-error").hidden = false;
  }
  scheduleRefresh();
});

setInterval(() => {
  if (state.run && isActive(state.run.status)) renderBudget();
}, 1000);

await refresh();
const liveState = $("live-state");
const runs = follow(`/api/runs/stream?runId=${encodeURIComponent(id)}`, {
  onEvent(type, data) {
    if (type === "run_updated") setRun(data);
  },
});
follow(`/api/runs/${id}/events/stream`, {
  onEvent(type, event) {
    if (state.events.some((e) => e.seq === event.seq)) return;
    state.events.push(event);
    renderEvents();
    if (REFRESH_ON.has(type)) scheduleRefresh();
    if (type === "run_finished") {
      runs.close();
      return "stop";
    }
  },
  onState(s) {
    liveState.textContent = s === "ended" ? "finished" : s;
    liveState.classList.toggle("on", s === "live");
  },
});
