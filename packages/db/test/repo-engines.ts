import type { RunStore } from "@looprun/core";
import { RunRepository, type RunRepositoryPort, SqliteRunStore } from "@looprun/db";
import { PgRunRepository, PgRunStore } from "@looprun/db/pg";
import { afterAll, beforeAll } from "vitest";
import { freshPgDatabase, truncateAll } from "./pg-support";
import { freshDatabase, removeDir } from "./support";

/** The API's repository and a worker's store on one database. */
export interface RepoEngine {
  repo: RunRepositoryPort;
  store: RunStore;
}

export type RepoEngineOpener = () => Promise<{ engine: RepoEngine; close(): Promise<void> }>;

/**
 * For `describe.each`: SQLite (a fresh file per test) and PostgreSQL (one database for the
 * file, emptied before each test). Call at a test file's top level: it registers the
 * PostgreSQL database's creation and removal.
 */
export function repoEngines(): [string, RepoEngineOpener][] {
  let pg: Awaited<ReturnType<typeof freshPgDatabase>> | undefined;
  beforeAll(async () => {
    pg = await freshPgDatabase();
  });
  afterAll(async () => {
    await pg?.drop();
  });
  return [
    [
      "SQLite",
      async () => {
        const { dir, database } = await freshDatabase();
        return {
          engine: { repo: new RunRepository(database.db), store: new SqliteRunStore(database.db) },
          close: async () => {
            database.close();
            await removeDir(dir);
          },
        };
      },
    ],
    [
      "PostgreSQL",
      async () => {
        if (!pg) throw new Error("no PostgreSQL database");
        await truncateAll(pg.database);
        const db = pg.database.db;
        return {
          engine: { repo: new PgRunRepository(db), store: new PgRunStore(db) },
          close: async () => {},
        };
      },
    ],
  ];
}
