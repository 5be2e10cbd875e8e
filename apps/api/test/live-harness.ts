import type { NewEvent } from "@looprun/core";
import { beforeAll, expect } from "vitest";
import type { createApp } from "../src/app";
import { type ENGINES, useApiHarness } from "./api-harness";
import { SseReader } from "./sse-client";

// What the live-stream tests share: an API over app.request() with short poll and heartbeat
// intervals, and runs moved along by writing to the store as a worker would.

const body = { task: "live", agent: { type: "command", command: "true" }, testCommand: "true" };
const budget = { elapsedMs: 0, remainingIterations: 6 };
export const event = (type: NewEvent["type"], data: Record<string, unknown> = {}): NewEvent => ({
  type,
  data: { ...data, budget },
});

export type Method = (...args: unknown[]) => unknown;

/** `object` with its method `name` replaced by `wrap(the method)`; the rest as they are. */
export function withMethod<T extends object>(
  object: T,
  name: string,
  wrap: (method: Method) => Method,
): T {
  return new Proxy(object, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      const bound = (value as Method).bind(target);
      return prop === name ? wrap(bound) : bound;
    },
  });
}

/**
 * The harness of a `describe` block (its beforeAll starts it, its afterAll closes it) on
 * `engine`, and the steps the tests take with it.
 */
export function liveApi(engine: (typeof ENGINES)[number]) {
  const h = useApiHarness(engine);
  let app: ReturnType<typeof createApp>;
  beforeAll(() => {
    app = h.appWith({ live: { pollMs: 20, heartbeatMs: 100 } });
  });

  // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
  const json = async (res: Response): Promise<any> => res.json();
  const live = {
    get h() {
      return h;
    },
    get app() {
      return app;
    },
    get store() {
      return h.store;
    },
    get repo() {
      return h.repo;
    },
    json,
    async submit(extra: Record<string, unknown> = {}) {
      const res = await app.request("/api/runs", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...body, ...extra }),
      });
      expect(res.status).toBe(202);
      return (await res.json()) as { id: string; sessionId: string };
    },
    async claim(id: string) {
      const claimed = await h.store.claimRun(id);
      if (!claimed) throw new Error(`no run ${id}`);
      return claimed.run.epoch;
    },
    async open(path: string, headers: Record<string, string> = {}) {
      const res = await app.request(path, { headers });
      if (res.status !== 200)
        throw new Error(`${path} answered ${res.status}: ${await res.text()}`);
      expect(res.headers.get("content-type")).toContain("text/event-stream");
      return new SseReader(res.body as ReadableStream<Uint8Array>);
    },
    start: (id: string, epoch: number) =>
      h.store.commit(
        id,
        epoch,
        { run: { status: "running", startedAt: Date.now() }, events: [event("run_started")] },
        Date.now(),
      ),
    finish: (id: string, epoch: number) =>
      h.store.commit(
        id,
        epoch,
        {
          run: { status: "succeeded", reason: "success", summary: "done", finishedAt: Date.now() },
          events: [
            event("run_finished", { status: "succeeded", reason: "success", summary: "done" }),
          ],
        },
        Date.now(),
      ),
    allEvents: async (id: string) =>
      (await json(await app.request(`/api/runs/${id}/events`))).items,
  };
  return live;
}
