// What watch says about each event of a run, and what the run is doing after it.

export interface EventView {
  seq: number;
  type: string;
  data: Record<string, unknown>;
}

/**
 * C0 and C1 control characters but newline and tab: agent-produced text (a plan, a question, a
 * tool's name, a reason) must not move the cursor, retitle the terminal or hide lines.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/** `text` without control characters (see CONTROL), fit to print on a terminal. */
export function printable(text: string): string {
  return text.replace(CONTROL, "");
}

const graphemes = new Intl.Segmenter(undefined, { granularity: "grapheme" });

/**
 * `text` cut to `max` characters as a person counts them (graphemes: an emoji, a letter with
 * its accents), ending `…` when cut — never half a character (a UTF-16 cut printed "�").
 */
export function shorten(text: string, max: number): string {
  const parts = Array.from(graphemes.segment(text), (s) => s.segment);
  return parts.length > max ? `${parts.slice(0, max - 1).join("")}…` : text;
}

/** What a person can do about a run waiting for them (printed with `approval_requested`). */
function howToAnswer(runId: string, d: Record<string, unknown>): string {
  if (d.kind === "question") {
    return [
      `blocked: the agent asks: ${String(d.question ?? "")}`,
      `  answer: looprun reply ${runId} "…"`,
      `  or end the run: looprun reject ${runId} --reason "…"`,
    ].join("\n");
  }
  return [
    "awaiting approval of the plan:",
    ...String(d.plan ?? "")
      .split("\n")
      .slice(0, 40)
      .map((line) => `  ${line}`),
    `  approve: looprun approve ${runId}   (an edited plan: --plan FILE)`,
    `  reject:  looprun reject ${runId} --reason "…"`,
  ].join("\n");
}

export function describe(e: EventView, runId: string): string {
  const d = e.data as Record<string, unknown> & {
    results?: { command: string; exitCode: number | null }[];
  };
  switch (e.type) {
    case "iteration_started":
      return `iteration ${d.iteration} started${Number(d.attempt) > 1 ? ` (attempt ${d.attempt})` : ""}`;
    case "agent_finished":
      // Abandoned: its worker died or lost the run (found after that long); else no exit code
      // means killed (its timeout, a stop, a signal, the run's deadline).
      if (d.abandoned === true) {
        return `agent abandoned (its worker died or lost the run), found after ${d.durationMs} ms`;
      }
      return d.exitCode === null || d.exitCode === undefined
        ? `agent killed (timed out, stopped or signalled) after ${d.durationMs} ms`
        : `agent exited ${d.exitCode} after ${d.durationMs} ms`;
    case "tool_called":
      return `tool ${d.server ?? ""}${d.server ? "." : ""}${d.tool ?? ""}${d.isError ? " failed" : ""}`;
    case "validation_passed":
    case "validation_failed":
      return `${e.type.replace("_", " ")}: ${(d.results ?? []).map((r) => `${r.command} → ${r.exitCode ?? "killed"}`).join(", ")}`;
    case "promise_missing":
      return `completion promise missing: no <promise>${d.completionPromise ?? ""}</promise> at a line's end`;
    case "phase_started":
      return `${d.phase ?? "a"} phase started`;
    case "phase_completed":
      return `${d.phase ?? "a"} phase completed`;
    case "phase_failed":
      return `${d.phase ?? "phase"} failed: ${d.error ?? ""}`;
    case "cooldown_started":
      return `cooling down ${d.cooldownMs} ms`;
    case "budget_exhausted":
      return `budget exhausted (${d.reason})`;
    case "approval_requested":
      return howToAnswer(runId, d);
    case "approval_granted":
      return `plan approved${d.edited ? " (edited)" : ""}: going on`;
    case "approval_rejected":
      return `${d.kind === "question" ? "question declined" : "plan rejected"}: ${d.reason ?? ""}`;
    case "reply_received":
      return `answered: ${String(d.message ?? "")}`;
    case "run_finished":
      return `finished: ${d.status} (${d.reason}) — ${d.summary}`;
    default:
      return e.type.replaceAll("_", " ");
  }
}

/** What the run is doing after this event, for the progress line. */
export function phaseAfter(e: EventView, current: string): string {
  const d = e.data;
  switch (e.type) {
    case "run_queued":
      return "queued";
    case "run_started":
    case "run_resumed":
    case "iteration_started":
      return "starting";
    case "phase_started":
      return `${String(d.phase ?? "")} phase`.trim();
    case "phase_completed":
      return `${String(d.phase ?? "")} phase done`.trim();
    case "agent_started":
    case "plan_created":
    case "plan_updated":
    case "step_completed":
      return "agent";
    case "tool_called":
      return `agent (${String(d.tool ?? "tool")})`;
    case "agent_finished":
      return "validating";
    case "validation_passed":
    case "validation_failed":
      return e.type.replace("_", " ");
    case "promise_missing":
      return "promise missing";
    case "review_approved":
    case "review_blocking_detected":
      return e.type.replaceAll("_", " ");
    case "cooldown_started":
      return "cooling down";
    case "stop_requested":
      return "stopping";
    case "approval_requested":
      return d.kind === "question" ? "waiting for a reply" : "awaiting approval";
    case "approval_granted":
    case "reply_received":
      return "queued";
    case "budget_exhausted":
      return "budget exhausted";
    case "run_finished":
      return String(d.status ?? "finished");
    default:
      return current;
  }
}
