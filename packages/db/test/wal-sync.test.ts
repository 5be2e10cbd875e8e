import { existsSync, mkdtempSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Database, openDatabase } from "../src/connection";
import { deferredSyncCommits } from "../src/wal-sync";

describe("deferredSyncCommits (a real SQLite file)", () => {
  let dir: string;
  let database: Database;
  let other: Database;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "looprun-wal-sync-"));
    database = openDatabase(join(dir, "looprun.db"));
    other = openDatabase(join(dir, "looprun.db"));
    database.sqlite.exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)");
  });
  afterEach(() => {
    other.close();
    database.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const synchronous = (db: Database) => Number(db.sqlite.pragma("synchronous", { simple: true }));
  const FULL = 2;
  const NORMAL = 1;

  it("commits with synchronous=NORMAL and leaves the connection's own setting for its other writes", () => {
    const commits = deferredSyncCommits(database);
    expect(synchronous(database)).toBe(FULL);
    let inside = -1;
    commits.commit(() => {
      inside = synchronous(database);
      database.sqlite.prepare("INSERT INTO notes (text) VALUES (?)").run("one");
    });
    expect(inside).toBe(NORMAL);
    expect(synchronous(database)).toBe(FULL);
  });

  it("puts the setting back when the transaction throws, and stores nothing of it", () => {
    const commits = deferredSyncCommits(database);
    expect(() =>
      commits.commit(() => {
        database.sqlite.prepare("INSERT INTO notes (text) VALUES (?)").run("lost");
        throw new Error("refused");
      }),
    ).toThrow("refused");
    expect(synchronous(database)).toBe(FULL);
    expect(other.sqlite.prepare("SELECT count(*) AS n FROM notes").get()).toEqual({ n: 0 });
  });

  it("shows a commit to other connections at once, and syncs the WAL file the commit wrote to", async () => {
    const commits = deferredSyncCommits(database);
    commits.commit(() => {
      database.sqlite.prepare("INSERT INTO notes (text) VALUES (?)").run("seen");
    });
    expect(other.sqlite.prepare("SELECT text FROM notes").all()).toEqual([{ text: "seen" }]);
    expect(existsSync(join(dir, "looprun.db-wal"))).toBe(true);
    await expect(commits.sync()).resolves.toBeUndefined();
    await expect(Promise.all([commits.sync(), commits.sync()])).resolves.toHaveLength(2);
  });

  it("rejects a sync when the WAL file is not there to sync (it is fsynced, not assumed)", async () => {
    const commits = deferredSyncCommits(database);
    commits.commit(() => {
      database.sqlite.prepare("INSERT INTO notes (text) VALUES (?)").run("x");
    });
    // The last connection to close checkpoints and removes the WAL file.
    other.close();
    database.close();
    expect(existsSync(join(dir, "looprun.db-wal"))).toBe(false);
    await expect(commits.sync()).rejects.toMatchObject({ code: "ENOENT" });
    database = openDatabase(join(dir, "looprun.db"));
    other = openDatabase(join(dir, "looprun.db"));
  });

  it("keeps one descriptor of the WAL file for its syncs, and lets it go on close", async () => {
    const wal = join(dir, "looprun.db-wal");
    const held = () =>
      readdirSync("/proc/self/fd").filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`) === wal;
        } catch {
          return false;
        }
      }).length;
    const commits = deferredSyncCommits(database);
    const bySqlite = held();
    for (let i = 0; i < 3; i++) {
      commits.commit(() => {
        database.sqlite.prepare("INSERT INTO notes (text) VALUES (?)").run(`n${i}`);
      });
      await commits.sync();
    }
    expect(held()).toBe(bySqlite + 1);
    commits.close();
    expect(held()).toBe(bySqlite);
  });

  it("refuses an in-memory database, which has no file to sync", () => {
    const memory = openDatabase(":memory:");
    try {
      expect(() => deferredSyncCommits(memory)).toThrow("in-memory");
    } finally {
      memory.close();
    }
  });
});
