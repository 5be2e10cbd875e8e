// The dashboard's access to the API: the bearer token kept in localStorage (when API_TOKEN is
// set), JSON requests, and server-sent events read with fetch (EventSource cannot send headers).

const TOKEN_KEY = "looprun.token";

export const authEnabled = () => document.body.dataset.auth === "on";
export const getToken = () => localStorage.getItem(TOKEN_KEY);
export const setToken = (token) => localStorage.setItem(TOKEN_KEY, token);
export const clearToken = () => localStorage.removeItem(TOKEN_KEY);

export function toLogin() {
  clearToken();
  location.assign(`/login?next=${encodeURIComponent(location.pathname + location.search)}`);
}

function headers(extra = {}) {
  const h = { ...extra };
  const token = getToken();
  if (authEnabled() && token) h.authorization = `Bearer ${token}`;
  return h;
}

/** An error the API answered: `{error: {code, message, issues?}}`. */
export class ApiError extends Error {
  constructor(status, body) {
    const err = body?.error ?? {};
    super(err.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = err.code ?? "error";
    this.issues = Array.isArray(err.issues) ? err.issues : [];
  }
}

const parse = (text) => {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
};

/** A request's answer as text; throws ApiError unless it succeeded (401 → sign in). */
async function request(method, path, body) {
  const res = await fetch(path, {
    method,
    headers: headers(body === undefined ? {} : { "content-type": "application/json" }),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status === 401 && authEnabled()) toLogin();
  if (!res.ok) throw new ApiError(res.status, parse(text));
  return text;
}

/** A JSON request; resolves with the body, throws ApiError otherwise (401 → sign in). */
export async function api(method, path, body) {
  return parse(await request(method, path, body));
}

/** A GET of text (a patch); throws ApiError with the API's reason otherwise. */
export const apiText = (path) => request("GET", path);

/**
 * For a page whose reads can overlap (a filter changed while the last read is on its way): each
 * call starts a read and returns whether that read is still the latest when its answer comes.
 */
export function latestRead() {
  let latest = 0;
  return () => {
    const mine = ++latest;
    return () => mine === latest;
  };
}

/** GET that answers `null` on a 404 (optional resources, e.g. a diff). */
export async function optional(path) {
  const res = await fetch(path, { headers: headers() });
  if (!res.ok) return null;
  return res.text();
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Parses a text/event-stream body, calling `onMessage({event, data, id})` per message. */
async function readEvents(body, onMessage) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let msg = { event: "message", data: [], id: undefined };
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buffer += value;
    const lines = buffer.split(/\r\n|\r|\n/);
    buffer = lines.pop() ?? "";
    for (const line of lines) {
      if (line === "") {
        if (msg.data.length > 0)
          onMessage({ event: msg.event, data: msg.data.join("\n"), id: msg.id });
        msg = { event: "message", data: [], id: undefined };
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") msg.event = value;
      else if (field === "data") msg.data.push(value);
      else if (field === "id") msg.id = value;
    }
  }
}

/**
 * Follows an SSE route: reconnects with Last-Event-ID when the connection drops, until
 * `onEvent` returns "stop" or `close()` is called. `onState` gets "live" | "reconnecting" |
 * "paused" | "ended".
 *
 * A hidden page (a background tab, a minimised window) gives its connection back and follows
 * again, from its last event, once it is shown: browsers keep 6 HTTP/1.1 connections per host
 * across all tabs, so open pages that all held a stream would leave none for anything else.
 */
export function follow(path, { onEvent, onState = () => {} }) {
  let lastId;
  let stopped = false;
  let controller;
  let wake = () => {};
  const hidden = () => document.visibilityState === "hidden";
  const onVisibility = () => {
    if (hidden()) controller?.abort();
    else wake();
  };
  document.addEventListener("visibilitychange", onVisibility);
  (async () => {
    let delay = 500;
    while (!stopped) {
      if (hidden()) {
        onState("paused");
        await new Promise((resolve) => {
          wake = resolve;
        });
        continue;
      }
      controller = new AbortController();
      try {
        const h = headers({ accept: "text/event-stream" });
        if (lastId !== undefined) h["last-event-id"] = lastId;
        const res = await fetch(path, { headers: h, signal: controller.signal, cache: "no-store" });
        if (res.status === 401 && authEnabled()) return toLogin();
        // 204: a finished run with nothing left to send (the SSE way of saying "do not come back").
        if (res.status === 404 || res.status === 204) break;
        if (res.ok && res.body) {
          onState("live");
          delay = 500;
          await readEvents(res.body, (msg) => {
            if (msg.id !== undefined) lastId = msg.id;
            let data = null;
            try {
              data = JSON.parse(msg.data);
            } catch {
              return;
            }
            if (onEvent(msg.event, data) === "stop") {
              stopped = true;
              controller.abort();
            }
          });
        }
      } catch {
        // Dropped, or aborted by close() or by the page being hidden: see below.
      }
      if (stopped) break;
      // Hidden: paused at the top of the loop, not a dropped connection to back off from.
      if (hidden()) continue;
      onState("reconnecting");
      await sleep(delay);
      delay = Math.min(delay * 2, 5000);
    }
    document.removeEventListener("visibilitychange", onVisibility);
    onState("ended");
  })();
  return {
    close() {
      stopped = true;
      controller?.abort();
      wake();
    },
  };
}

// Signing out forgets the token here too (the server clears the cookie).
document.getElementById("signout")?.addEventListener("submit", clearToken);
