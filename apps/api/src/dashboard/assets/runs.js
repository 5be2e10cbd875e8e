// The runs list: newest first, filtered by status and session, paged, and kept live by the
// runs stream (GET /api/runs/stream).
import { api, follow, latestRead } from "./api.js";
import { ago, badge, clock, elapsedNow, h, isActive, truncate } from "./format.js";
import { setupSubmitForm } from "./submit-form.js";

const params = new URLSearchParams(location.search);
const LIMIT = Math.min(100, Math.max(1, Number(params.get("limit")) || 20));
const state = {
  status: "",
  sessionId: "",
  cursors: [undefined],
  nextCursor: null,
  runs: new Map(),
};
const body = document.getElementById("runs-body");
const statusSelect = document.getElementById("filter-status");
const sessionInput = document.getElementById("filter-session");
const liveState = document.getElementById("live-state");
const notice = document.getElementById("notice");

/**
 * The filters and the page from the address and its history entry (the page opening, or the
 * browser's Back and Forward). The cursors are those of the pages up to the one shown: the
 * page's own is in the URL (a reload or a shared link shows the same page), the ones before it
 * in the history entry ("Newer" from a link opened afresh goes to the first page).
 */
function readAddress(entry) {
  const q = new URLSearchParams(location.search);
  state.status = q.get("status") ?? "";
  state.sessionId = q.get("sessionId") ?? "";
  state.cursors = entry?.cursors ?? [undefined, ...(q.get("cursor") ? [q.get("cursor")] : [])];
  statusSelect.value = state.status;
  sessionInput.value = state.sessionId;
}
readAddress(history.state);

const page = () => state.cursors.length - 1;
const matches = (run) =>
  (!state.status || run.status === state.status) &&
  (!state.sessionId || run.sessionId === state.sessionId);

function row(run, readAt) {
  const n = run.budget.maxIterations;
  return h(
    "tr",
    {
      class: `run-row status-row-${run.status}`,
      dataset: { id: run.id },
      onclick: () => location.assign(`/runs/${run.id}`),
    },
    h("td", {}, badge(run.status)),
    h(
      "td",
      { class: "task" },
      h(
        "a",
        { href: `/runs/${run.id}`, onclick: (e) => e.stopPropagation() },
        truncate(run.task, 80),
      ),
      h("div", { class: "muted small mono" }, run.id),
    ),
    h("td", { class: "mono small" }, run.sessionId),
    h("td", { class: "num" }, `${run.iteration} / ${n}`),
    h(
      "td",
      { class: "progress small" },
      truncate(run.reason ? `${run.reason} — ${run.summary ?? ""}` : run.progress, 90),
    ),
    h(
      "td",
      { class: "num mono elapsed", dataset: { readAt: String(readAt) } },
      clock(elapsedNow(run, readAt)),
    ),
    h("td", { class: "num small created", title: run.createdAt }, ago(run.createdAt)),
  );
}

function render() {
  const now = Date.now();
  const runs = [...state.runs.values()].sort((a, b) => (a.run.id < b.run.id ? 1 : -1));
  body.replaceChildren(
    ...(runs.length === 0
      ? [
          h(
            "tr",
            { class: "empty" },
            h(
              "td",
              { colspan: 7 },
              page() > 0
                ? "No more runs."
                : state.status || state.sessionId
                  ? "No runs match these filters."
                  : "No runs yet. Submit one with “New run”.",
            ),
          ),
        ]
      : runs.map(({ run, readAt }) => row(run, readAt ?? now))),
  );
  document.getElementById("page-newer").disabled = page() === 0;
  document.getElementById("page-older").disabled = state.nextCursor === null;
  document.getElementById("page-label").textContent = `page ${page() + 1}`;
}

// An answer to an earlier list (other filters, another page) comes too late to be shown.
const startRead = latestRead();

async function load() {
  const isLatest = startRead();
  const q = new URLSearchParams({ limit: String(LIMIT) });
  if (state.status) q.set("status", state.status);
  if (state.sessionId) q.set("sessionId", state.sessionId);
  const cursor = state.cursors[page()];
  if (cursor) q.set("cursor", cursor);
  try {
    const res = await api("GET", `/api/runs?${q}`);
    if (!isLatest()) return;
    const readAt = Date.now();
    state.runs = new Map(res.items.map((run) => [run.id, { run, readAt }]));
    state.nextCursor = res.nextCursor;
    render();
  } catch (error) {
    if (!isLatest()) return;
    body.replaceChildren(
      h("tr", { class: "empty" }, h("td", { colspan: 7, class: "form-error" }, error.message)),
    );
  }
}

function onRunUpdated(run) {
  const known = state.runs.has(run.id);
  // A run the filter does not take is not shown; one that no longer matches it (`running`,
  // and it finished) leaves the list.
  if (!matches(run)) {
    if (state.runs.delete(run.id)) render();
    return;
  }
  // New runs appear on the first page only; others are updated where they are.
  if (!known && page() > 0) return;
  state.runs.set(run.id, { run, readAt: Date.now() });
  if (!known && state.runs.size > LIMIT) {
    const oldest = [...state.runs.keys()].sort()[0];
    state.runs.delete(oldest);
    state.nextCursor ??= oldest;
  }
  render();
}

/** This list's address: its filters and page (never `new=1`: the form, once closed, stays so). */
function address() {
  const q = new URLSearchParams();
  if (state.status) q.set("status", state.status);
  if (state.sessionId) q.set("sessionId", state.sessionId);
  if (params.has("limit")) q.set("limit", String(LIMIT));
  const cursor = state.cursors[page()];
  if (cursor) q.set("cursor", cursor);
  return q.size > 0 ? `/?${q}` : "/";
}

function applyFilters() {
  state.status = statusSelect.value;
  state.sessionId = sessionInput.value.trim();
  state.cursors = [undefined];
  history.replaceState({ cursors: state.cursors }, "", address());
  load();
}

/** Another page: a history entry of its own, so the browser's Back goes to the page before. */
function turnPage(cursors) {
  state.cursors = cursors;
  history.pushState({ cursors }, "", address());
  load();
}

statusSelect.addEventListener("change", applyFilters);
sessionInput.addEventListener("change", applyFilters);
document
  .getElementById("page-older")
  .addEventListener("click", () => turnPage([...state.cursors, state.nextCursor]));
document
  .getElementById("page-newer")
  .addEventListener("click", () => turnPage(state.cursors.slice(0, -1)));
window.addEventListener("popstate", (event) => {
  readAddress(event.state);
  load();
});

// Ticks the elapsed time of running runs, and every run's age, between updates.
setInterval(() => {
  for (const cell of body.querySelectorAll("td.elapsed")) {
    const id = cell.parentElement.dataset.id;
    const entry = state.runs.get(id);
    if (entry && isActive(entry.run.status))
      cell.textContent = clock(elapsedNow(entry.run, entry.readAt));
  }
  for (const cell of body.querySelectorAll("td.created")) {
    const entry = state.runs.get(cell.parentElement.dataset.id);
    if (entry) cell.textContent = ago(entry.run.createdAt);
  }
}, 1000);

const form = setupSubmitForm({
  onSubmitted(created) {
    notice.replaceChildren(
      "Submitted run ",
      h("a", { href: `/runs/${created.id}` }, created.id),
      ` (session ${created.sessionId}).`,
    );
    notice.hidden = false;
    if (page() === 0) load();
  },
});
document.getElementById("open-submit").addEventListener("click", () => form.open());
document.getElementById("nav-new-run").addEventListener("click", (e) => {
  e.preventDefault();
  form.open();
});
if (params.get("new") === "1") form.open();
document.getElementById("submit-dialog").addEventListener("close", () => {
  if (new URLSearchParams(location.search).has("new")) {
    history.replaceState({ cursors: state.cursors }, "", address());
  }
});

load();
// The page again once the stream is live: a change between the two is applied twice, never lost.
follow("/api/runs/stream", {
  onEvent(type, data) {
    if (type === "run_updated") onRunUpdated(data);
  },
  onState(s) {
    liveState.textContent = s === "live" ? "live" : s;
    liveState.classList.toggle("on", s === "live");
    if (s === "live") load();
  },
});
