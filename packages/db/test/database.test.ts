import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MIGRATIONS_FOLDER, openDatabase } from "@looprun/db";
import { afterEach, describe, expect, it } from "vitest";
import { removeDir, startWorker, tempDir, upgradedSqlite, workerOutput } from "./support";

const journal = JSON.parse(readFileSync(join(MIGRATIONS_FOLDER, "meta/_journal.json"), "utf8")) as {
  entries: unknown[];
};

const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await removeDir(dir);
});

async function dbPath(): Promise<string> {
  const dir = await tempDir();
  dirs.push(dir);
  return join(dir, "nested", "looprun.db");
}

function tableNames(sqlite: ReturnType<typeof openDatabase>["sqlite"]): string[] {
  return (
    sqlite.prepare("select name from sqlite_master where type = 'table' order by name").all() as {
      name: string;
    }[]
  ).map((r) => r.name);
}

describe("openDatabase", () => {
  it("creates the file (and its directory) and applies the migrations", async () => {
    const database = openDatabase(await dbPath());
    try {
      expect(tableNames(database.sqlite)).toEqual(
        expect.arrayContaining([
          "__drizzle_migrations",
          "events",
          "iterations",
          "review_artifacts",
          "runs",
          "sessions",
          "tool_calls",
        ]),
      );
      const applied = database.sqlite
        .prepare("select count(*) as n from __drizzle_migrations")
        .get() as {
        n: number;
      };
      expect(applied.n).toBe(journal.entries.length);
    } finally {
      database.close();
    }
  });

  it("sets WAL, foreign keys, synchronous FULL and the busy timeout", async () => {
    const database = openDatabase(await dbPath(), { busyTimeoutMs: 1234 });
    try {
      const { sqlite } = database;
      expect(sqlite.pragma("journal_mode", { simple: true })).toBe("wal");
      expect(sqlite.pragma("foreign_keys", { simple: true })).toBe(1);
      // 2 = FULL
      expect(sqlite.pragma("synchronous", { simple: true })).toBe(2);
      expect(sqlite.pragma("busy_timeout", { simple: true })).toBe(1234);
    } finally {
      database.close();
    }
  });

  it("does not apply a migration twice when reopened", async () => {
    const path = await dbPath();
    openDatabase(path).close();
    const again = openDatabase(path);
    try {
      const applied = again.sqlite
        .prepare("select count(*) as n from __drizzle_migrations")
        .get() as {
        n: number;
      };
      expect(applied.n).toBe(journal.entries.length);
    } finally {
      again.close();
    }
  });

  it("gives the abandoned attempts of an older database an outcome", async () => {
    const rows = await upgradedSqlite(
      "0010_abandoned_outcome",
      (sqlite) => {
        sqlite
          .prepare("insert into sessions (id, workspace, created_at) values ('s', '/w', 0)")
          .run();
        sqlite
          .prepare(
            "insert into runs (id, session_id, task, spec, workspace, status, metrics, created_at) values ('r', 's', 't', '{}', '/w', 'succeeded', '{}', 0)",
          )
          .run();
        const insert = sqlite.prepare(
          "insert into iterations (run_id, n, attempt, status, outcome, prompt, validation, started_at, finished_at) values ('r', 1, ?, ?, ?, 'p', '[]', 0, 1)",
        );
        // As a version before the outcome of abandoned attempts stored them.
        insert.run(1, "abandoned", null);
        insert.run(2, "abandoned", "stopped");
        insert.run(3, "passed", "complete");
        // What the later migrations made, which they make again.
        sqlite.prepare("drop index idempotency_keys_run_id_idx").run();
      },
      ({ sqlite }) =>
        sqlite.prepare("select attempt, status, outcome from iterations order by attempt").all(),
    );
    expect(rows).toEqual([
      { attempt: 1, status: "abandoned", outcome: "error" },
      { attempt: 2, status: "abandoned", outcome: "stopped" },
      { attempt: 3, status: "passed", outcome: "complete" },
    ]);
  });

  it("has the partial unique index that allows one active run per session", async () => {
    const database = openDatabase(await dbPath());
    try {
      const { sqlite } = database;
      const index = sqlite
        .prepare(
          "select sql from sqlite_master where type = 'index' and name = 'runs_one_active_per_session'",
        )
        .get() as { sql: string } | undefined;
      expect(index?.sql).toMatch(/CREATE UNIQUE INDEX/i);
      expect(index?.sql).toMatch(
        /WHERE status in \('queued', 'running', 'awaiting_approval', 'stopping'\)/,
      );

      // The index itself (not the repository's code) refuses a second active run.
      sqlite
        .prepare("insert into sessions (id, workspace, created_at) values ('s', '/w', 0)")
        .run();
      const insert = sqlite.prepare(
        "insert into runs (id, session_id, task, spec, workspace, status, metrics, created_at) values (?, 's', 't', '{}', '/w', ?, '{}', 0)",
      );
      insert.run("r1", "succeeded");
      insert.run("r2", "failed");
      insert.run("r3", "running");
      expect(() => insert.run("r4", "queued")).toThrow(/UNIQUE constraint failed/);
      expect(() => insert.run("r5", "stopping")).toThrow(/UNIQUE constraint failed/);
      expect(() => insert.run("r6", "awaiting_approval")).toThrow(/UNIQUE constraint failed/);
      insert.run("r7", "stopped");
      sqlite.prepare("update runs set status = 'succeeded' where id = 'r3'").run();
      insert.run("r8", "queued");
    } finally {
      database.close();
    }
  });

  it("enforces foreign keys and cascades deletes", async () => {
    const database = openDatabase(await dbPath());
    try {
      const { sqlite } = database;
      expect(() =>
        sqlite
          .prepare(
            "insert into runs (id, session_id, task, spec, workspace, status, metrics, created_at) values ('r', 'nope', 't', '{}', '/w', 'queued', '{}', 0)",
          )
          .run(),
      ).toThrow(/FOREIGN KEY constraint failed/);
      sqlite
        .prepare("insert into sessions (id, workspace, created_at) values ('s', '/w', 0)")
        .run();
      sqlite
        .prepare(
          "insert into runs (id, session_id, task, spec, workspace, status, metrics, created_at) values ('r', 's', 't', '{}', '/w', 'queued', '{}', 0)",
        )
        .run();
      sqlite
        .prepare(
          "insert into events (run_id, seq, type, at, data) values ('r', 1, 'run_queued', 0, '{}')",
        )
        .run();
      sqlite.prepare("delete from runs where id = 'r'").run();
      expect(sqlite.prepare("select count(*) as n from events").get()).toEqual({ n: 0 });
    } finally {
      database.close();
    }
  });

  it("lets several processes open (and migrate) a fresh file at once", async () => {
    const path = await dbPath();
    const go = join(path, "..", "..", "go");
    const workers = Array.from({ length: 4 }, () => startWorker(["open", path, go]));
    await Promise.all(workers.map((w) => w.ready));
    writeFileSync(go, "");
    const results = await Promise.all(workers.map((w) => w.done));
    for (const result of results) expect(workerOutput(result)).toEqual({ ok: true });
    const database = openDatabase(path);
    try {
      const applied = database.sqlite
        .prepare("select count(*) as n from __drizzle_migrations")
        .get() as {
        n: number;
      };
      expect(applied.n).toBe(journal.entries.length);
    } finally {
      database.close();
    }
  });
});
