import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LeaseLostError, type NewEvent, RunAlreadyActiveError } from "@looprun/core";
import { openPgDatabase, PgRunRepository, PgRunStore } from "@looprun/db/pg";
import { describe, expect, it } from "vitest";
import { createDatabase } from "../../../tests/support/postgres";
import { pgWithPools, postgresAdminUrl } from "./pg-support";
import { iteration } from "./store-fixtures";
import { newRun } from "./support";

/*
 * Several writers at once on PostgreSQL. Each "process" is its own pool (its own server
 * connections), so the database, not the event loop, decides who goes first.
 */

const h = pgWithPools(3, 4);

const event = (type: NewEvent["type"]): NewEvent => ({
  type,
  data: { budget: { elapsedMs: 0, remainingIterations: 1 } },
});

describe("PostgreSQL under concurrent writers", () => {
  it("lets several processes open (and migrate) a fresh database at once", async () => {
    const fresh = await createDatabase(postgresAdminUrl());
    try {
      const opened = await Promise.all([1, 2, 3, 4].map(() => openPgDatabase(fresh.url)));
      const { rows } = await opened[0]!.pool.query<{ n: number }>(
        "select count(*)::int as n from drizzle.__drizzle_migrations",
      );
      await Promise.all(opened.map((o) => o.close()));
      expect(rows[0]?.n).toBeGreaterThan(0);
    } finally {
      await fresh.drop();
    }
  });

  it("accepts exactly one of 40 concurrent submits for one session", async () => {
    const repos = h.pools.map((p) => new PgRunRepository(p.db));
    const results = await Promise.allSettled(
      Array.from({ length: 40 }, (_, i) =>
        repos[i % repos.length]!.createRun(newRun({}, { sessionId: "race" })),
      ),
    );
    const accepted = results.filter((r) => r.status === "fulfilled");
    const refused = results.filter((r) => r.status === "rejected");
    expect(accepted).toHaveLength(1);
    const winner = accepted[0]!.value.id;
    for (const r of refused) {
      expect(r.reason).toBeInstanceOf(RunAlreadyActiveError);
      expect((r.reason as RunAlreadyActiveError).activeRunId).toBe(winner);
    }
    const repo = new PgRunRepository(h.database.db);
    expect(await repo.activeRunOf("race")).toBe(winner);
    expect((await repo.getSession("race"))?.runs.map((r) => r.id)).toEqual([winner]);
  });

  it("gives distinct epochs to concurrent claims", async () => {
    const repo = new PgRunRepository(h.database.db);
    const run = await repo.createRun(newRun({}));
    const perWorker = 30;
    const epochs = (
      await Promise.all(
        h.pools.map(async (p) => {
          const store = new PgRunStore(p.db);
          const got: number[] = [];
          for (let i = 0; i < perWorker; i++) got.push((await store.claimRun(run.id))!.run.epoch);
          return got;
        }),
      )
    ).flat();
    expect(new Set(epochs).size).toBe(h.pools.length * perWorker);
    expect(Math.max(...epochs)).toBe(h.pools.length * perWorker);
    expect((await repo.getRun(run.id))?.epoch).toBe(h.pools.length * perWorker);
  });

  it("numbers events and tool calls without gaps under concurrent commits", async () => {
    const repo = new PgRunRepository(h.database.db);
    const run = await repo.createRun(newRun({}));
    const { epoch } = (await new PgRunStore(h.database.db).claimRun(run.id))!.run;
    const commits = 20;
    await Promise.all([
      ...h.pools.map(async (p, w) => {
        const store = new PgRunStore(p.db);
        for (let i = 0; i < commits; i++) {
          await store.commit(
            run.id,
            epoch,
            {
              events: [event("step_completed"), event("tool_called")],
              toolCalls: [
                {
                  iteration: 1,
                  server: `w${w}`,
                  tool: "run_command",
                  args: { i },
                  isError: false,
                  result: "ok",
                  durationMs: 1,
                },
              ],
              // A stop request lands in between: a writer's "running" never overrides it.
              run: { status: "running" },
            },
            i,
          );
        }
      }),
      repo.requestStop(run.id, 5),
    ]);
    const events = await repo.listEvents(run.id, 0, 1000);
    const expected = 1 + 1 + h.pools.length * commits * 2; // run_queued, stop_requested, the rest
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: expected }, (_, i) => i + 1));
    const calls = await repo.listToolCalls(run.id);
    expect(calls.map((c) => c.seq)).toEqual(
      Array.from({ length: h.pools.length * commits }, (_, i) => i + 1),
    );
    expect((await repo.getRun(run.id))?.status).toBe("stopping");
  });

  it("fences a holder the moment another claims the run", async () => {
    const repo = new PgRunRepository(h.database.db);
    const run = await repo.createRun(newRun({}));
    const old = new PgRunStore(h.pools[0]!.db);
    const next = new PgRunStore(h.pools[1]!.db);
    const { epoch } = (await old.claimRun(run.id))!.run;
    let written = 0;
    const holder = (async () => {
      for (let n = 1; ; n++) {
        try {
          await old.commit(
            run.id,
            epoch,
            { insertIteration: iteration(run.id, n, 1), events: [event("iteration_started")] },
            n,
          );
          written = n;
        } catch (error) {
          return error;
        }
      }
    })();
    while (written < 3) await new Promise((r) => setTimeout(r, 5));
    const claimed = (await next.claimRun(run.id))!;
    await next.commit(run.id, claimed.run.epoch, { events: [event("run_resumed")] }, 1000);
    expect(await holder).toBeInstanceOf(LeaseLostError);
    // Nothing of the old holder's after the claim: its iterations end where the claim saw them.
    expect(claimed.lastIteration?.n).toBe(written);
    const events = await repo.listEvents(run.id, 0, 1000);
    expect(events.at(-1)?.type).toBe("run_resumed");
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect((await repo.listIterations(run.id)).map((i) => i.n)).toEqual(
      Array.from({ length: written }, (_, i) => i + 1),
    );
  });

  it("sets a new connection up before its first query: no query is sent while another runs (pg warns, pg 9 refuses)", async () => {
    // In a process of its own: pg warns once per process.
    const fresh = await createDatabase(postgresAdminUrl());
    const dir = mkdtempSync(join(tmpdir(), "looprun-pg-connect-"));
    try {
      const script = join(dir, "queries.mts");
      writeFileSync(
        script,
        [
          `import { openPgDatabase } from ${JSON.stringify(join(__dirname, "../src/pg/connection.ts"))};`,
          `const database = await openPgDatabase(${JSON.stringify(fresh.url)}, { idleInTransactionTimeoutMs: 1234 });`,
          "const sql = \"select pg_sleep(0.05), current_setting('idle_in_transaction_session_timeout') as t\";",
          "const shown = await Promise.all([1, 2, 3, 4, 5, 6].map(() => database.pool.query(sql)));",
          "console.log(JSON.stringify(shown.map((r) => r.rows[0].t)));",
          "await database.close();",
        ].join("\n"),
      );
      const child = spawnSync(process.execPath, ["--import", "tsx", script], { encoding: "utf8" });
      expect(child.stderr).not.toContain("DeprecationWarning");
      expect(child.status, child.stderr).toBe(0);
      expect(JSON.parse(child.stdout)).toEqual(Array(6).fill("1234ms"));
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await fresh.drop();
    }
  });

  it("ends a session left idle inside a transaction, so its row locks do not hold the run", async () => {
    // The default, on every connection of a pool opened without the option.
    const { rows: shown } = await h.pools[0]!.pool.query(
      "show idle_in_transaction_session_timeout",
    );
    expect(shown).toEqual([{ idle_in_transaction_session_timeout: "1min" }]);
    const repo = new PgRunRepository(h.database.db);
    const run = await repo.createRun(newRun({}));
    // A worker paused (or cut off) in the middle of a commit, with the run's row locked.
    const paused = await openPgDatabase(h.pg.url, { idleInTransactionTimeoutMs: 300 });
    const client = await paused.pool.connect();
    client.on("error", () => {}); // the server ends the session: expected here
    try {
      await client.query("begin");
      await client.query("select id from runs where id = $1 for update", [run.id]);
      await new Promise((r) => setTimeout(r, 1200));
      // Another worker's claim gets the row at once (nowait: it would fail were it still held).
      const other = h.pools[0]!.pool;
      const { rows } = await other.query("select id from runs where id = $1 for update nowait", [
        run.id,
      ]);
      expect(rows).toEqual([{ id: run.id }]);
      await expect(client.query("select 1")).rejects.toThrow();
    } finally {
      client.release(true);
      await paused.close();
    }
  });

  it("stores text with NUL bytes, which PostgreSQL cannot hold, with U+FFFD", async () => {
    const { repo, run } = await storedIteration(
      {},
      {
        agent: { exitCode: 0, output: "a\0b", durationMs: 1 },
        prompt: "p\0",
      },
    );
    const [it1] = await repo.listIterations(run.id);
    expect(it1?.agent?.output).toBe("a\uFFFDb");
    expect(it1?.prompt).toBe("p\uFFFD");
  });

  it("stores a lone UTF-16 surrogate with U+FFFD, so that /metrics' JSON reads still work", async () => {
    const half = "\u{1F600} done".slice(1); // an emoji cut in its middle: "\udE00 done"
    const { repo, run } = await storedIteration(
      { testCommand: "true # \ud800" },
      {
        status: "failed",
        outcome: "validation_failed",
        finishedAt: 2,
        agent: { exitCode: 0, output: half, durationMs: 1 },
        validation: [{ command: "true # \ud800", exitCode: 1, durationMs: 1, output: half }],
      },
    );
    const [it1] = await repo.listIterations(run.id);
    expect(it1?.agent?.output).toBe("\uFFFD done");
    expect(it1?.validation?.[0]?.command).toBe("true # \uFFFD");
    const read = await repo.metricsReader().read(() => {});
    expect(read.runCountsByStatus.length).toBeGreaterThan(0);
  });

  it("stores a tool call whose argument names hold a NUL byte or a lone surrogate, and its pattern", async () => {
    const repo = new PgRunRepository(h.database.db);
    const run = await repo.createRun(newRun({}));
    const store = new PgRunStore(h.database.db);
    const { epoch } = (await store.claimRun(run.id))!.run;
    const args = { path: "a.txt", "n\0": "1", "\ud800k": "2" };
    await store.commit(
      run.id,
      epoch,
      {
        toolCalls: [
          {
            iteration: 1,
            server: "workspace",
            tool: "write_file",
            args,
            isError: false,
            result: "ok",
            durationMs: 1,
          },
        ],
      },
      1,
    );
    const [call] = await repo.listToolCalls(run.id);
    expect(call?.args).toEqual({ path: "a.txt", "n\uFFFD": "1", "\uFFFDk": "2" });
    const patterns = await repo.failurePatterns({ workspace: run.workspace, limit: 10 });
    expect(patterns.map((p) => p.shape)).toEqual(["{n\uFFFD:string,path:string,\uFFFDk:string}"]);
  });
});

/** A run submitted with `body`, claimed, and its first iteration committed with `patch`. */
async function storedIteration(
  body: Record<string, unknown>,
  patch: Parameters<typeof iteration>[3],
) {
  const repo = new PgRunRepository(h.database.db);
  const run = await repo.createRun(newRun(body));
  const store = new PgRunStore(h.database.db);
  const { epoch } = (await store.claimRun(run.id))!.run;
  await store.commit(run.id, epoch, { insertIteration: iteration(run.id, 1, 1, patch) }, 1);
  return { repo, run };
}
