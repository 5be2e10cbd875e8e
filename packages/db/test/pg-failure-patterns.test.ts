import type { NewToolCall } from "@looprun/core";
import { pgErrorCode } from "@looprun/db/pg";
import { describe, expect, it } from "vitest";
import { recordPatterns, workspacePatterns } from "../src/pg/failure-patterns";
import { pgWithPools } from "./pg-support";
import { waitFor } from "./support";

/*
 * Runs sharing a workspace commit their failure patterns at the same time. Each "process" is
 * its own pool, so PostgreSQL's row locks, not the event loop, decide who waits.
 */

const h = pgWithPools(2, 2);

const WS = "/tmp/ws-pg-learn";
const call = (tool: string): NewToolCall => ({
  iteration: 1,
  server: "workspace",
  tool,
  args: { path: "a.txt" },
  isError: false,
  result: "ok",
  durationMs: 1,
});

/** Sessions of this test's database waiting for a lock another one holds. */
async function waitingForLocks(): Promise<number> {
  const { rows } = await h.database.pool.query<{ n: number }>(
    "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
  );
  return rows[0]?.n ?? 0;
}

describe("PostgreSQL failure patterns under concurrent commits", () => {
  it("commits two runs that touch the same patterns in opposite orders (no deadlock victim)", async () => {
    await recordPatterns(
      h.database.db,
      WS,
      "run-0",
      { toolCalls: [call("list_directory"), call("write_file")] },
      1,
    );
    let locked!: () => void;
    const firstLocked = new Promise<void>((r) => {
      locked = r;
    });
    let release!: () => void;
    const released = new Promise<void>((r) => {
      release = r;
    });
    // Run 1 commits list_directory, then write_file (key order), pausing in between.
    const first = h.pools[0]!.db.transaction(async (tx) => {
      await recordPatterns(tx, WS, "run-1", { toolCalls: [call("list_directory")] }, 2);
      locked();
      await released;
      await recordPatterns(tx, WS, "run-1", { toolCalls: [call("write_file")] }, 2);
    });
    await firstLocked;
    // Run 2 observed them the other way round: write_file, then list_directory.
    const second = h.pools[1]!.db.transaction((tx) =>
      recordPatterns(
        tx,
        WS,
        "run-2",
        { toolCalls: [call("write_file"), call("list_directory")] },
        3,
      ),
    );
    await waitFor(async () => (await waitingForLocks()) > 0, "run 2 waiting for run 1's row");
    release();
    const outcomes = await Promise.allSettled([first, second]);
    // Before the upserts were sorted by key, one of them was a deadlock's victim (40P01).
    const codes = outcomes.map((o) =>
      o.status === "rejected" ? (pgErrorCode(o.reason) ?? String(o.reason)) : "ok",
    );
    expect(codes).toEqual(["ok", "ok"]);
    const patterns = await workspacePatterns(h.database.db, WS, 10);
    expect(patterns.map((p) => [p.subject, p.successes]).sort()).toEqual([
      ["workspace.list_directory", 3],
      ["workspace.write_file", 3],
    ]);
  });
});
