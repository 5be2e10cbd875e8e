// One iteration of the run page's timeline: agent, validation commands, tool calls, review,
// diff and feedback, each folded; what a reader opened stays open across live updates.
import { badge, duration, h, plain, time } from "./format.js";

const openDetails = new Set();

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

function diffLineClass(line) {
  if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ")) return "meta";
  if (line.startsWith("@@")) return "hunk";
  if (line.startsWith("+")) return "add";
  if (line.startsWith("-")) return "del";
  return "";
}

function diffView(text) {
  return h(
    "pre",
    { class: "diff mono" },
    text.split("\n").map((line) => h("span", { class: diffLineClass(line) }, `${line}\n`)),
  );
}

/** The iteration's review, folded: its verdict in the summary, the issues inside. */
function reviewOf(it, ctx) {
  const r = it.reviewId ? ctx.reviews.find((x) => x.id === it.reviewId) : null;
  if (!r) return null;
  const verdict = r.blockingIssues.length > 0 ? `${r.blockingIssues.length} blocking` : "approved";
  const items = (title, list) =>
    list.length
      ? [
          h("h3", {}, title),
          h(
            "ul",
            {},
            list.map((i) => h("li", {}, i)),
          ),
        ]
      : [];
  return details(
    `${it.n}.${it.attempt}.review`,
    h(
      "span",
      {},
      "Review ",
      h("span", { class: `exit ${r.blockingIssues.length ? "bad" : "ok"}` }, verdict),
      ` · score ${r.score}`,
    ),
    h(
      "div",
      { class: "it-review" },
      ...items("Blocking", r.blockingIssues),
      ...items("Non-blocking", r.nonBlockingIssues),
      ...items("Fix plan", r.fixPlan),
    ),
  );
}

export function iterationItem(it, ctx) {
  const key = `${it.n}.${it.attempt}`;
  const calls = ctx.toolCalls.filter((c) => c.iteration === it.n);
  const failedCalls = calls.filter((c) => c.isError).length;
  const took = it.finishedAt
    ? duration(Date.parse(it.finishedAt) - Date.parse(it.startedAt))
    : "running…";
  const diff = ctx.diffs.get(key);
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
          h("pre", { class: "output mono" }, plain(it.agent.output) || "(no output)"),
        )
      : h(
          "div",
          { class: "muted small" },
          it.status === "running"
            ? "agent running…"
            : "the agent's run was cut short (the attempt was handed back or lost)",
        ),
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
              h("pre", { class: "output mono" }, plain(v.output) || "(no output)"),
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
    reviewOf(it, ctx),
    diff ? details(`${key}.diff`, "Diff", diffView(diff)) : null,
    it.feedback
      ? details(
          `${key}.feedback`,
          ctx.last
            ? "Feedback (the run ended: no next iteration)"
            : "Feedback for the next iteration",
          h("pre", { class: "output mono" }, plain(it.feedback)),
        )
      : null,
  );
}
