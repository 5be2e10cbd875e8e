// How the run page shows events: roles for the filter, one-line descriptions, highlights.
import { duration, h, time } from "./format.js";

export function roleOf(type) {
  if (
    type.startsWith("agent_") ||
    type.startsWith("plan_") ||
    type === "tool_called" ||
    type === "step_completed"
  ) {
    return "agent";
  }
  if (type.startsWith("validation_") || type === "promise_missing") return "validation";
  if (type.startsWith("review_")) return "reviewer";
  return "run";
}

const HIGHLIGHT = {
  review_blocking_detected: "hl-bad",
  review_approved: "hl-good",
  budget_exhausted: "hl-warn",
  approval_requested: "hl-warn",
  validation_failed: "hl-soft-bad",
  promise_missing: "hl-soft-bad",
  run_finished: "hl-end",
};

export function describe(e) {
  const d = e.data ?? {};
  switch (e.type) {
    case "iteration_started":
      return `iteration ${d.iteration} started${Number(d.attempt) > 1 ? ` (attempt ${d.attempt})` : ""}`;
    case "agent_started":
      return `agent started: ${d.agent ?? d.type ?? ""}`;
    case "agent_finished":
      if (d.abandoned === true) {
        return `agent abandoned (its worker died or lost the run), found after ${duration(d.durationMs)}`;
      }
      return d.exitCode === null || d.exitCode === undefined
        ? `agent killed after ${duration(d.durationMs)}`
        : `agent exited ${d.exitCode} after ${duration(d.durationMs)}`;
    case "tool_called":
      return `${d.isError ? "✗" : "✓"} ${d.server ?? ""}${d.server ? "." : ""}${d.tool ?? "tool"}`;
    case "validation_passed":
    case "validation_failed":
      return `${e.type === "validation_passed" ? "passed" : "failed"}: ${(d.results ?? [])
        .map((r) => `${r.command} → ${r.exitCode}`)
        .join(", ")}${d.partial ? " (partial: enough gates passed)" : ""}`;
    case "promise_missing":
      return `completion promise missing: no <promise>${d.completionPromise ?? ""}</promise> at a line's end`;
    case "review_blocking_detected": {
      const count = Array.isArray(d.blockingIssues) ? d.blockingIssues.length : d.blockingIssues;
      return `review blocks: ${count ?? "?"} blocking issue(s)${d.score !== undefined ? `, score ${d.score}` : ""}`;
    }
    case "review_approved":
      return `review approved${d.score !== undefined ? `, score ${d.score}` : ""}`;
    case "cooldown_started":
      return `cooling down ${duration(d.cooldownMs)}`;
    case "budget_exhausted":
      return `budget exhausted (${d.reason ?? d.budget?.reason ?? ""})`;
    case "phase_started":
      return `${d.phase ?? "phase"} started`;
    case "phase_completed":
      return `${d.phase ?? "phase"} done${d.durationMs !== undefined ? ` after ${duration(d.durationMs)}` : ""}`;
    case "phase_failed":
      return `${d.phase ?? "phase"} failed: ${d.error ?? ""}`;
    case "approval_requested":
      return d.kind === "question"
        ? `blocked, asks: ${d.question ?? ""}`
        : "the plan waits for approval";
    case "approval_granted":
      return `plan approved${d.edited ? " (edited)" : ""}`;
    case "approval_rejected":
      return `${d.kind === "question" ? "question declined" : "plan rejected"}: ${d.reason ?? ""}`;
    case "reply_received":
      return `answered: ${d.message ?? ""}`;
    case "rollback_applied":
      return `workspace rolled back to ${Number(d.iteration) === 0 ? "before the run" : `iteration ${d.iteration}`}${d.onFailure ? " (the run failed)" : ""}: ${(d.files ?? []).length} file(s)`;
    case "run_finished":
      return `finished: ${d.status} (${d.reason})${d.summary ? ` — ${d.summary}` : ""}`;
    default:
      return e.type.replaceAll("_", " ");
  }
}

export function eventItem(e) {
  return h(
    "li",
    {
      class: `event role-${roleOf(e.type)} ${HIGHLIGHT[e.type] ?? ""}`,
      dataset: { seq: String(e.seq), type: e.type },
    },
    h("span", { class: "seq mono" }, `#${e.seq}`),
    h("span", { class: "etype" }, e.type),
    h("span", { class: "when muted" }, time(e.at)),
    h("div", { class: "edesc" }, describe(e)),
  );
}
