// The statistics page: /api/stats and /api/stats/tools (with the learned patterns), refreshed
// every few seconds.
import { api, latestRead } from "./api.js";
import { duration, h, plain, truncate } from "./format.js";

const REFRESH_MS = 5000;
const pct = (rate) => (rate === null || rate === undefined ? "—" : `${Math.round(rate * 100)}%`);
const ms = (value) => (value === null || value === undefined ? "—" : duration(value));

function fill(id, rows, empty, columns) {
  const body = document.getElementById(id);
  body.replaceChildren(
    ...(rows.length === 0
      ? [h("tr", { class: "empty" }, h("td", { colspan: columns }, empty))]
      : rows),
  );
}

function renderConvergence(stats) {
  const facts = [
    ["Runs", stats.runs.total],
    ["Success rate", pct(stats.successRate)],
    ["Iterations to converge (mean)", stats.meanIterationsToConverge?.toFixed(1) ?? "—"],
    ["Time to converge (mean)", ms(stats.meanTimeToConvergeMs)],
    ["Iterations", stats.iterations],
    ["Validation failures", stats.validationFailures],
    ["Review blockings", stats.reviewBlockings],
  ];
  document
    .getElementById("convergence")
    .replaceChildren(...facts.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))]));
}

function renderTools(stats) {
  fill(
    "tools-body",
    stats.tools.map((t) =>
      h(
        "tr",
        {},
        h("td", {}, `${t.server}.${t.tool}`),
        h("td", { class: "num" }, t.calls),
        h("td", { class: "num" }, t.failures),
        h("td", { class: "num" }, pct(t.successRate)),
        h("td", { class: "num" }, `${Math.round(t.meanDurationMs)} ms`),
      ),
    ),
    "No tool calls yet.",
    5,
  );
  fill(
    "patterns-body",
    stats.patterns.map((p) =>
      h(
        "tr",
        { class: p.failures > 0 ? "pattern failing" : "pattern", dataset: { subject: p.subject } },
        h("td", {}, p.scope),
        h("td", {}, h("code", {}, p.subject), p.shape ? ` ${p.shape}` : ""),
        h("td", { title: p.workspace }, truncate(p.workspace.split("/").pop() ?? "", 30)),
        h("td", { class: "num" }, p.successes),
        h("td", { class: "num" }, p.failures),
        h("td", { class: "num" }, `${p.meanDurationMs} ms`),
        // Without colour codes, as the run page shows outputs (the API keeps them as printed).
        h(
          "td",
          { title: plain(p.lastErrors.join("\n")) },
          truncate(plain(p.lastErrors[0] ?? ""), 120),
        ),
      ),
    ),
    "Nothing learned yet: patterns appear once agents call tools and validation commands run.",
    7,
  );
}

// A refresh that answers after a newer one (the workspace filter changed meanwhile) is dropped.
const startRead = latestRead();

async function load() {
  const isLatest = startRead();
  const notice = document.getElementById("notice");
  const workspace = document.getElementById("filter-workspace").value.trim();
  const q = new URLSearchParams(workspace ? { workspace } : {});
  try {
    const [convergence, tools] = await Promise.all([
      api("GET", "/api/stats"),
      api("GET", `/api/stats/tools?${q}`),
    ]);
    if (!isLatest()) return;
    renderConvergence(convergence);
    renderTools(tools);
    notice.hidden = true;
  } catch (error) {
    if (!isLatest()) return;
    notice.textContent = `Could not load the statistics: ${error.message}`;
    notice.hidden = false;
  }
}

document.getElementById("filter-workspace").addEventListener("change", load);
load();
// A hidden page is not refreshed; it is, at once, when it is shown again.
setInterval(() => {
  if (document.visibilityState !== "hidden") load();
}, REFRESH_MS);
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState !== "hidden") load();
});
