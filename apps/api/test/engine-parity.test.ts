// The same history written into the API on SQLite and on PostgreSQL gives the same HTTP answers,
// byte for byte: run lists and their cursors, filters, a run's iterations, tool calls,
// reviews, events (paged), artifacts, diffs and patch, sessions, statistics and metrics.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type ApiHarness, apiHarness, ENGINES, type Engine } from "./api-harness";
import { determinism, T0, type Transcript, writeHistory } from "./parity-history";

interface Side {
  engine: Engine;
  h: ApiHarness;
  clock: { t: number };
  transcript: Transcript;
  ids: string[];
}

const HOUR = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString();

describe("the API on SQLite and on PostgreSQL", () => {
  const sides: Side[] = [];

  beforeAll(async () => {
    for (const engine of ENGINES) {
      const { clock, deps } = determinism();
      const h = await apiHarness(inject("redisUrl"), engine, deps);
      await h.untilReady();
      const transcript: Transcript = [];
      const ids = await writeHistory(h, clock, transcript);
      // Reads happen a while after the last write: times of active runs keep moving.
      clock.t = T0 + 4 * HOUR;
      sides.push({ engine, h, clock, transcript, ids });
    }
  }, 120_000);

  afterAll(async () => {
    for (const side of sides) await side.h.close();
  });

  /** A response as text, with the harness's own temporary directory taken out. */
  const fetchText = async (side: Side, path: string) => {
    const res = await side.h.app.request(path);
    const headers = [...res.headers]
      .filter(([name]) => name.startsWith("x-looprun") || name === "content-type")
      .map(([name, value]) => `${name}: ${value}`)
      .join("\n");
    const root = side.h.workspacesRoot;
    return `${res.status}\n${headers}\n\n${(await res.text()).replaceAll(root, "<root>")}`;
  };

  /** Asks both engines; returns SQLite's answer after checking PostgreSQL's is the same. */
  const same = async (path: string): Promise<string> => {
    const [sqlite, pg] = await Promise.all(sides.map((side) => fetchText(side, path)));
    expect(pg, `GET ${path}`).toBe(sqlite);
    return sqlite as string;
  };

  /** Follows `nextCursor` from `path`, checking every page on both engines. */
  const walk = async (path: string): Promise<string[]> => {
    const ids: string[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 50; page++) {
      const sep = path.includes("?") ? "&" : "?";
      const text = await same(cursor ? `${path}${sep}cursor=${cursor}` : path);
      const body = JSON.parse(text.slice(text.indexOf("\n\n") + 2));
      ids.push(...body.items.map((r: { id: string }) => r.id));
      cursor = body.nextCursor;
      if (cursor === null) return ids;
    }
    throw new Error(`${path}: more than 50 pages`);
  };

  it("wrote the same history: the same ids, and the same answers to every write", () => {
    const [sqlite, pg] = sides;
    expect(pg?.ids).toEqual(sqlite?.ids);
    expect(sqlite?.transcript.length).toBeGreaterThan(24);
    expect(JSON.stringify(pg?.transcript).replaceAll(pg?.h.workspacesRoot ?? "", "<root>")).toBe(
      JSON.stringify(sqlite?.transcript).replaceAll(sqlite?.h.workspacesRoot ?? "", "<root>"),
    );
    const statuses = new Set(sqlite?.transcript.map((s) => s.status));
    expect([...statuses].sort()).toEqual([200, 202, 409]);
  });

  it("lists runs newest first with the same pages and cursors, filtered alike", async () => {
    const all = await walk("/api/runs?limit=7");
    expect(all).toEqual([...(sides[0]?.ids ?? [])].reverse());
    await same("/api/runs");
    await same("/api/runs?limit=100");
    for (const status of ["succeeded", "failed", "stopped", "queued", "running"]) {
      expect((await walk(`/api/runs?status=${status}&limit=2`)).length, status).toBeGreaterThan(0);
    }
    for (const session of ["alpha", "beta", "gamma", "delta", "nobody"]) {
      await walk(`/api/runs?sessionId=${session}&limit=2`);
      await same(`/api/runs?sessionId=${session}&status=failed`);
      await same(`/api/sessions/${session}`);
    }
    await same("/api/runs?limit=0");
    await same(`/api/runs?cursor=${sides[0]?.ids[10]}&limit=5`);
  });

  it("serves every run, its iterations, tool calls, reviews, events, artifacts and changes alike", async () => {
    for (const id of sides[0]?.ids ?? []) {
      for (const sub of ["", "/iterations", "/tool-calls", "/reviews", "/artifacts", "/patch"]) {
        await same(`/api/runs/${id}${sub}`);
      }
      for (const n of [1, 2, 3]) await same(`/api/runs/${id}/iterations/${n}/diff`);
      await same(`/api/runs/${id}/events`);
      await same(`/api/runs/${id}/events?after=2&limit=3`);
      await same(`/api/runs/${id}/events?after=1000`);
      // Past PostgreSQL's integer (events.seq): nothing, not an out-of-range error.
      expect(await same(`/api/runs/${id}/events?after=2147483648`)).toMatch(/^200\n/);
    }
    await same("/api/runs/01JQ000000ZZZZZZZZZZZZZZZZ");
  });

  it("answers 404 alike for an id with a NUL byte (PostgreSQL's text cannot hold one)", async () => {
    for (const path of [
      "/api/runs/%00",
      "/api/runs/a%00b/events?after=1",
      "/api/runs/%00/events/stream",
      "/api/runs/%00/patch",
      "/api/sessions/x%00y",
      "/api/stats/tools?runId=%00",
      "/runs/%00",
    ]) {
      expect(await same(path), path).toMatch(/^404\n/);
    }
    // In a query: refused (400) or matching nothing, alike.
    for (const path of [
      "/api/runs?cursor=%00",
      "/api/runs?sessionId=%00",
      "/api/runs?status=%00",
      "/api/stats?sessionId=%00",
      "/api/stats/tools?workspace=%00",
    ]) {
      expect(await same(path), path).toMatch(/^(200|400)\n/);
    }
    for (const path of ["/api/runs/%00/stop", "/api/runs/%00/approve", "/api/runs/%00/rollback"]) {
      const answers = await Promise.all(
        sides.map(async (side) => {
          const res = await side.h.app.request(path, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: "{}",
          });
          return `${res.status} ${await res.text()}`;
        }),
      );
      expect(answers[1], path).toBe(answers[0]);
      expect(answers[0], path).toMatch(/^404 /);
    }
  });

  it("gives the same statistics over any window", async () => {
    const stats = JSON.parse((await same("/api/stats")).split("\n\n")[1] as string);
    expect(stats.runs.total).toBe(24);
    for (const [since, until] of [
      [T0, undefined],
      [T0 + 13 * 60_000, T0 + HOUR],
      [T0 + HOUR - (T0 % HOUR), T0 + 2 * HOUR - (T0 % HOUR)],
      [T0 - HOUR, T0 + 90 * 60_000],
      [undefined, T0 + 100 * 60_000],
    ]) {
      const q = [since && `since=${iso(since)}`, until && `until=${iso(until)}`].filter(Boolean);
      await same(`/api/stats?${q.join("&")}`);
    }
    const tools = JSON.parse((await same("/api/stats/tools")).split("\n\n")[1] as string);
    expect(tools.totals.calls).toBeGreaterThan(10);
    expect(tools.patterns.length).toBeGreaterThan(1);
    await same(`/api/stats/tools?since=${iso(T0 + HOUR)}`);
    await same(`/api/stats/tools?runId=${sides[0]?.ids[0]}`);
    await same("/api/stats/tools?workspace=shared&scope=tool&patterns=3");
    await same("/api/stats/tools?scope=command");
    await same("/api/stats/tools?runId=nope");
  });

  it("reports the same metrics, also after later writes", async () => {
    const metrics = async () => {
      const [sqlite, pg] = await Promise.all(
        sides.map(async (side) =>
          (await fetchText(side, "/metrics"))
            .split("\n")
            // Each harness has its own queue: its job counts are not the database's.
            .filter((line) => !line.startsWith("looprun_queue_"))
            .join("\n"),
        ),
      );
      expect(pg).toBe(sqlite);
      return sqlite as string;
    };
    const before = await metrics();
    expect(before).toContain('looprun_iterations_total{outcome="complete"}');
    // A running run of each engine finishes its iteration; the next scrape counts it once.
    for (const side of sides) {
      const id = side.ids[20] as string;
      const claimed = await side.h.store.claimRun(id);
      await side.h.store.commit(
        id,
        claimed?.run.epoch ?? -1,
        {
          run: { status: "succeeded", reason: "success", finishedAt: side.clock.t },
          updateIteration: {
            n: 1,
            attempt: 1,
            patch: { status: "passed", outcome: "complete", finishedAt: side.clock.t },
          },
          toolCalls: [
            {
              iteration: 1,
              server: "git",
              tool: "status",
              args: {},
              isError: true,
              result: "fatal",
              durationMs: 5,
            },
          ],
        },
        side.clock.t,
      );
    }
    const after = await metrics();
    expect(after).not.toBe(before);
    expect(await metrics()).toBe(after);
    await same("/api/stats");
    await same(`/api/runs/${sides[0]?.ids[20]}`);
  });
});
