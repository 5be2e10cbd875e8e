import {
  type ApiClient,
  ApiRequestError,
  ApiUnreachableError,
  apiErrorOf,
  fetchFailure,
  runPath,
} from "../api-client";
import { messages, type StreamHooks } from "./sse-reader";
import type { EventView } from "./watch-events";
import { clock, Progress, type WatchOutput } from "./watch-progress";

export type { WatchOutput } from "./watch-progress";

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

/** Why a connection attempt failed, as a person can act on it. */
const UNREACHABLE = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

function failureReason(error: unknown): string {
  const { code, detail } = fetchFailure(error);
  // Refused, unknown host, no route: nothing answers there (yet). Anything else broke a connection.
  if (code !== undefined && UNREACHABLE.has(code)) return `API unreachable (${code})`;
  return `connection to the API lost (${detail})`;
}

/**
 * Attempts in a row that brought nothing: each failure is told once per outage and reason, the
 * pause before the next attempt doubles from `minDelayMs` to `maxDelayMs`, and there is no next
 * attempt after `maxFailures`.
 */
class Retries {
  private failures = 0;
  /** The reason told for the outage under way (null: none told). */
  private told: string | null = null;
  /** The longest pause between attempts. */
  readonly maxDelayMs: number;

  constructor(
    private readonly progress: Progress,
    private readonly opts: WatchOptions,
  ) {
    this.maxDelayMs = opts.maxDelayMs ?? 5000;
  }

  /** An attempt brought something: the outage, if any, is over. */
  recovered(): void {
    this.failures = 0;
    this.told = null;
  }

  /**
   * Counts a failed attempt and waits before the next: at least `floorMs`, and without a word
   * when `quiet`. False after the last attempt (the progress line cleared, nothing waited).
   */
  async failed(reason: string, { quiet = false, floorMs = 0 } = {}): Promise<boolean> {
    this.failures++;
    if (this.failures >= (this.opts.maxFailures ?? 20)) {
      this.progress.finish();
      return false;
    }
    const notice = quiet || reason === this.told ? undefined : `${reason}, retrying…`;
    if (notice) this.told = reason;
    this.progress.reconnecting(this.failures, notice);
    const backoff = Math.min(
      (this.opts.minDelayMs ?? 250) * 2 ** (this.failures - 1),
      this.maxDelayMs,
    );
    await pause(Math.max(backoff, floorMs), this.opts.signal);
    return true;
  }
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
  const url = client.url(runPath(id, "/events/stream"));
  const idleTimeoutMs = opts.idleTimeoutMs ?? 45_000;
  const interrupted = () => {
    progress.finish();
    return new WatchInterrupted(`stopped watching run ${id}`);
  };
  const retries = new Retries(progress, opts);
  let last = 0;
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
        throw new FatalStreamError((await apiErrorOf(res, { token: client.token })).message);
      // 204: the run is finished and nothing is left after `last` (the SSE way to stop).
      if (res.status === 204) {
        finished = true;
      } else if (!res.ok || !res.body) {
        reason = `the API answered ${(await apiErrorOf(res, { token: client.token })).message}`;
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
    if (brought) retries.recovered();
    if (finished) break;
    // A stream that brought something and ended is how SSE goes on: reopened without a word.
    // The server's `retry:` counts, within reason (a huge one would look like a hang).
    const again = await retries.failed(reason, {
      quiet: brought && ended,
      floorMs: ended ? Math.min(serverRetryMs, retries.maxDelayMs) : 0,
    });
    if (!again)
      throw new Error(`lost the event stream of run ${id} at ${client.baseUrl}: ${reason}`);
  }
  const run = await finalView(client, id, retries, interrupted, opts.signal);
  const iterations = run.metrics?.iterations ?? run.iteration;
  // The summary is the agent's words: `finish` prints it without control characters.
  progress.finish(
    `run ${run.id} ${run.status} (${run.reason ?? "—"})${run.summary ? ` — ${run.summary}` : ""} · ${iterations} iteration${iterations === 1 ? "" : "s"} · ${clock(run.budget.elapsedMs)}`,
  );
  return run;
}

/**
 * The finished run as the API has it now (its summary, its iterations). The outcome is known
 * already: an API that goes away at this moment (a restart), fails (5xx) or sheds load (429) is
 * waited for as the stream was, not taken for an error.
 */
async function finalView(
  client: ApiClient,
  id: string,
  retries: Retries,
  interrupted: () => Error,
  signal?: AbortSignal,
): Promise<RunView> {
  for (;;) {
    if (signal?.aborted) throw interrupted();
    try {
      return await client.request<RunView>("GET", runPath(id));
    } catch (error) {
      let reason: string;
      if (error instanceof ApiUnreachableError) reason = failureReason(error.cause);
      else if (error instanceof ApiRequestError && (error.status >= 500 || error.status === 429))
        reason = `the API answered ${error.message}`;
      else throw error;
      if (!(await retries.failed(reason))) throw error;
    }
  }
}
