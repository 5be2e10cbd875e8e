// Small DOM and formatting helpers shared by the pages.

/** Creates an element: `h("a", {href, class}, "text", child…)`; null/false children are skipped. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** `mm:ss`, or `h:mm:ss` past an hour. */
export function clock(ms) {
  const total = Math.max(0, Math.floor(ms / 1000));
  const hh = Math.floor(total / 3600);
  const mm = String(Math.floor((total % 3600) / 60)).padStart(2, "0");
  const ss = String(total % 60).padStart(2, "0");
  return hh > 0 ? `${hh}:${mm}:${ss}` : `${mm}:${ss}`;
}

/**
 * "00:02 elapsed · 44:58 left of 45:00": what is left counted from the whole seconds shown as
 * elapsed, so that the two add up to the budget.
 */
export function timeBudgetLeft(elapsedMs, maxMs) {
  const shown = Math.floor(Math.max(0, elapsedMs) / 1000) * 1000;
  return `${clock(elapsedMs)} elapsed · ${clock(Math.max(0, maxMs - shown))} left of ${clock(maxMs)}`;
}

/** "850 ms", "4.2 s", "3 min 5 s". */
export function duration(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}

/** Terminal colour and cursor codes (CSI, OSC, character sets, two-character escapes). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: they are what it removes
const ANSI = /\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()*+][ -~]|[@-Z\\-_])/g;

/** A command's output as text for the page: without terminal escape codes. */
export const plain = (text) => text.replace(ANSI, "");

export function ago(iso) {
  if (!iso) return "—";
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (s < 5) return "just now";
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

export const time = (iso) => (iso ? new Date(iso).toLocaleTimeString() : "—");

export const ACTIVE = ["queued", "running", "awaiting_approval", "stopping"];
export const isActive = (status) => ACTIVE.includes(status);

export function badge(status) {
  return h("span", { class: `badge status-${status}` }, status.replaceAll("_", " "));
}

/** Elapsed time of a run now: the server's figure plus the time since it was read, while running. */
export function elapsedNow(run, readAt) {
  const base = run.budget.elapsedMs;
  // A run waiting for a person: its budget clock is paused.
  const ticking = run.startedAt && !run.finishedAt && run.status !== "awaiting_approval";
  return ticking ? base + (Date.now() - readAt) : base;
}

const graphemes = new Intl.Segmenter(undefined, { granularity: "grapheme" });

/** `text` cut to `n` characters as a person counts them: never half an emoji. */
export function truncate(text, n) {
  if (!text) return "";
  if (text.length <= n) return text;
  const parts = Array.from(graphemes.segment(text), (s) => s.segment);
  return parts.length > n ? `${parts.slice(0, n - 1).join("")}…` : text;
}
