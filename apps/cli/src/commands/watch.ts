import { type ApiClient, describeApiError, runPath } from "../api-client";

interface RunView {
  id: string;
  status: string;
  reason: string | null;
  summary: string | null;
  iteration: number;
  progress: string | null;
  budget: { maxIterations: number; elapsedMs: number; remainingIterations: number };
  metrics?: { iterations: number };
}
interface EventView {
  seq: number;
  type: string;
  data: Record<string, unknown>;
}
interface SseMessage {
  event: string;
  data: string;
  id?: string;
}

/** Where watch writes: a TTY gets a live progress line, anything else one line per event. */
export interface WatchOutput {
  write(text: string): unknown;
  isTTY?: boolean;
}

export interface WatchOptions {
  /** Reconnect when nothing (not even a `: ping`) arrived for this long. @defaultValue 45000 */
  idleTimeoutMs?: number;
  /** Give up after this many connection attempts in a row that bring nothing. @defaultValue 20 */
  maxFailures?: number;
  /** The pause after the first attempt that brings nothing, doubled after each next one. @defaultValue 250 */
  minDelayMs?: number;
  /** The longest pause between two attempts. @defaultValue 5000 */
  maxDelayMs?: number;
  /** Ends the watch (Ctrl-C): the progress line is cleared, watchRun rejects with WatchInterrupted. */
  signal?: AbortSignal;
}

/** An answer that no retry can change (unknown run, bad token). */
class FatalStreamError extends Error {
  override readonly name = "FatalStreamError";
}

/** The watch was ended by its `signal`; the run goes on. */
export class WatchInterrupted extends Error {
  override readonly name = "WatchInterrupted";
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

function describe(e: EventView, runId: string): string {
  const d = e.data as Record<string, unknown> & {
    results?: { command: string; exitCode: number | null }[];
  };
  switch (e.type) {
    case "iteration_started":
      return `iteration ${d.iteration} started${Number(d.attempt) > 1 ? ` (attempt ${d.attempt})` : ""}`;
    case "agent_finished":
      return `agent exited ${d.exitCode} after ${d.durationMs} ms`;
    case "tool_called":
      return `tool ${d.server ?? ""}${d.server ? "." : ""}${d.tool ?? ""}${d.isError ? " failed" : ""}`;
    case "validation_passed":
    case "validation_failed":
      return `${e.type.replace("_", " ")}: ${(d.results ?? []).map((r) => `${r.command} → ${r.exitCode}`).join(", ")}`;
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
function phaseAfter(e: EventView, current: string): string {
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

const clock = (ms: number) => {
  const s = Math.floor(Math.max(0, ms) / 1000);
  return `${String(Math.floor(s / 60)).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}`;
};

/** Event lines, and on a TTY a progress line below them, redrawn every second. */
class Progress {
  private iteration = 0;
  private phase = "connecting";
  private resumePhase: string | null = null;
  private elapsedMs = 0;
  private readAt = Date.now();
  private ticking = false;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly out: WatchOutput,
    private readonly maxIterations: number,
    private readonly runId = "",
  ) {
    if (out.isTTY) {
      this.timer = setInterval(() => this.redraw(), 1000);
      this.timer.unref();
    }
  }

  event(e: EventView): void {
    const budget = e.data.budget as { elapsedMs?: number } | undefined;
    this.elapsedMs = budget?.elapsedMs ?? this.elapsedMs;
    this.readAt = Date.now();
    if (typeof e.data.iteration === "number") this.iteration = e.data.iteration;
    this.phase = phaseAfter(e, this.phase);
    // The clock stands still while the run waits for a person (the budget does not count it).
    this.ticking = !["run_queued", "run_finished", "approval_requested"].includes(e.type);
    const n =
      typeof e.data.iteration === "number" ? `${e.data.iteration}/${this.maxIterations} ` : "";
    this.print(`[${clock(this.elapsedMs)}] ${n}${describe(e, this.runId)}`);
  }

  /**
   * The stream is down: the attempt goes on the progress line (a TTY's), `notice` (once per
   * outage and reason) on a line of its own.
   */
  reconnecting(attempt: number, notice?: string): void {
    this.resumePhase ??= this.phase;
    this.phase = `reconnecting (attempt ${attempt})`;
    if (notice) this.print(notice);
    else if (this.out.isTTY) this.redraw();
  }

  /** The stream is back: the progress line shows what the run was doing. */
  connected(): void {
    if (this.resumePhase === null) return;
    this.phase = this.resumePhase;
    this.resumePhase = null;
    if (this.out.isTTY) this.redraw();
  }

  /** Clears the progress line and prints the outcome, if any. */
  finish(text?: string): void {
    if (this.timer) clearInterval(this.timer);
    if (this.out.isTTY) this.out.write("\r\x1b[2K");
    if (text) this.out.write(`${text}\n`);
  }

  private line(): string {
    const elapsed = this.elapsedMs + (this.ticking ? Date.now() - this.readAt : 0);
    const it =
      this.iteration > 0 ? `iteration ${this.iteration} of ${this.maxIterations}` : "not started";
    return `▸ ${it} · ${this.phase} · ${clock(elapsed)} elapsed`;
  }

  private print(text: string): void {
    if (!this.out.isTTY) {
      this.out.write(`${text}\n`);
      return;
    }
    this.out.write(`\r\x1b[2K${text}\n${this.line()}`);
  }

  private redraw(): void {
    this.out.write(`\r\x1b[2K${this.line()}`);
  }
}

/** What the SSE reader reports besides messages. */
interface StreamHooks {
  /** Any bytes arrived. */
  activity(): void;
  /** A comment (`: ping`): the stream is alive. */
  comment(): void;
  /** The server's `retry:` (ms): how long it wants a client to wait before reconnecting. */
  retry(ms: number): void;
}

/** Yields the messages of a text/event-stream body. */
async function* messages(
  body: ReadableStream<Uint8Array>,
  hooks: StreamHooks,
): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "message";
  let data: string[] = [];
  let id: string | undefined;
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    hooks.activity();
    buffer += decoder.decode(chunk, { stream: true });
    const lines = buffer.split(/\r\n|\r|\n/);
    buffer = lines.pop() ?? "";
    for (const line of lines) {
      if (line === "") {
        if (data.length > 0)
          yield { event, data: data.join("\n"), ...(id === undefined ? {} : { id }) };
        event = "message";
        data = [];
        id = undefined;
        continue;
      }
      if (line.startsWith(":")) {
        hooks.comment();
        continue;
      }
      const colon = line.indexOf(":");
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
      else if (field === "id") id = value;
      else if (field === "retry" && /^\d+$/.test(value)) hooks.retry(Number(value));
    }
  }
}

/** Waits `ms`, or less when `signal` aborts. */
const pause = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((done) => {
    const timer = setTimeout(finish, ms);
    signal?.addEventListener("abort", finish, { once: true });
    function finish() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", finish);
      done();
    }
  });

async function errorText(res: Response, token: string | undefined): Promise<string> {
  const text = await res.text().catch(() => "");
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: the text is the message
  }
  return describeApiError(res.status, body, text, { token }).message;
}

/** Why a connection attempt failed, as a person can act on it. */
function failureReason(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } }).cause;
  const code = cause?.code ?? (error as { code?: unknown }).code;
  // Refused, unknown host, no route: nothing answers there (yet). Anything else broke a connection.
  if (typeof code === "string" && code.startsWith("E")) return `API unreachable (${code})`;
  const detail = typeof cause?.message === "string" ? cause.message : (error as Error).message;
  return `connection to the API lost (${detail})`;
}

/**
 * Follows a run's event stream (SSE) until `run_finished`, reconnecting with Last-Event-ID when
 * the connection drops or goes silent; prints progress; resolves with the run's final view.
 *
 * Attempts that bring nothing new (no event, no ping) back off: `minDelayMs` doubling to
 * `maxDelayMs`, at least the server's `retry:` when it ended the stream itself (an API that
 * shuts down does so at once, on every attempt). An outage is told once per reason, not per
 * attempt; a stream ended after it brought something is reopened without a word (a proxy's
 * time limit, say).
 */
export async function watchRun(
  client: ApiClient,
  id: string,
  out: WatchOutput = process.stdout,
  opts: WatchOptions = {},
): Promise<RunView> {
  const first = await client.request<RunView>("GET", runPath(id));
  const progress = new Progress(out, first.budget.maxIterations, id);
  const url = new URL(runPath(id, "/events/stream"), client.baseUrl);
  const idleTimeoutMs = opts.idleTimeoutMs ?? 45_000;
  const minDelayMs = opts.minDelayMs ?? 250;
  const maxDelayMs = opts.maxDelayMs ?? 5000;
  const interrupted = () => {
    progress.finish();
    return new WatchInterrupted(`stopped watching run ${id}`);
  };
  let last = 0;
  /** Attempts in a row that brought nothing. */
  let failures = 0;
  /** The reason told for the outage under way (null: none told). */
  let told: string | null = null;
  let serverRetryMs = 0;
  let finished = false;
  while (!finished) {
    if (opts.signal?.aborted) throw interrupted();
    const abort = new AbortController();
    const signal = opts.signal ? AbortSignal.any([abort.signal, opts.signal]) : abort.signal;
    let idle: NodeJS.Timeout | undefined;
    let silent = false;
    let brought = false;
    let ended = false;
    let reason = "";
    const activity = () => {
      clearTimeout(idle);
      idle = setTimeout(() => {
        silent = true;
        abort.abort();
      }, idleTimeoutMs);
    };
    try {
      activity();
      const headers: Record<string, string> = { accept: "text/event-stream" };
      if (client.token) headers.authorization = `Bearer ${client.token}`;
      if (last > 0) headers["last-event-id"] = String(last);
      const res = await fetch(url, { headers, signal });
      if (res.status === 400 || res.status === 401 || res.status === 404)
        throw new FatalStreamError(await errorText(res, client.token));
      if (!res.ok || !res.body) {
        reason = `the API answered ${await errorText(res, client.token)}`;
      } else {
        // Back once the stream brings something: an API shutting down answers, then ends.
        const bring = () => {
          if (!brought) progress.connected();
          brought = true;
        };
        const hooks: StreamHooks = {
          activity,
          comment: bring,
          retry: (ms) => {
            serverRetryMs = ms;
          },
        };
        for await (const message of messages(res.body, hooks)) {
          const event = JSON.parse(message.data) as EventView;
          if (event.seq <= last) continue;
          last = event.seq;
          bring();
          progress.event(event);
          if (event.type === "run_finished") {
            finished = true;
            break;
          }
        }
        ended = true;
        reason = "the API ended the event stream (shutting down?)";
      }
    } catch (error) {
      if (opts.signal?.aborted) throw interrupted();
      if (error instanceof FatalStreamError) {
        progress.finish();
        throw error;
      }
      reason = silent
        ? `no word from the API for ${Math.round(idleTimeoutMs / 1000)} s`
        : failureReason(error);
    } finally {
      clearTimeout(idle);
      abort.abort();
    }
    if (finished) break;
    if (brought) {
      failures = 0;
      told = null;
    }
    failures++;
    if (failures >= (opts.maxFailures ?? 20)) {
      progress.finish();
      throw new Error(`lost the event stream of run ${id} at ${client.baseUrl}: ${reason}`);
    }
    // A stream that brought something and ended is how SSE goes on: reopened without a word.
    const quiet = brought && ended;
    const notice = quiet || reason === told ? undefined : `${reason}, retrying…`;
    if (notice) told = reason;
    progress.reconnecting(failures, notice);
    const backoff = Math.min(minDelayMs * 2 ** (failures - 1), maxDelayMs);
    // The server's `retry:` counts, within reason (a huge one would look like a hang).
    const floor = ended ? Math.min(serverRetryMs, maxDelayMs) : 0;
    await pause(Math.max(backoff, floor), opts.signal);
  }
  const run = await client.request<RunView>("GET", runPath(id));
  const iterations = run.metrics?.iterations ?? run.iteration;
  progress.finish(
    `run ${run.id} ${run.status} (${run.reason ?? "—"})${run.summary ? ` — ${run.summary}` : ""} · ${iterations} iteration${iterations === 1 ? "" : "s"} · ${clock(run.budget.elapsedMs)}`,
  );
  return run;
}
