import { looksSecret, messageOf } from "@looprun/core";
import {
  type Database,
  isLooprunDatabase,
  type OpenDatabaseOptions,
  openDatabase,
} from "./connection";
import type { PgDatabase, PgRunRepository, PgRunStore } from "./pg";
import { RunRepository } from "./run-repository";
import { SqliteRunStore } from "./sqlite-run-store";

export interface OpenStorageOptions {
  /** A `postgres://` or `postgresql://` URL: the PostgreSQL store. Wins over `path`. */
  url?: string;
  /** The SQLite file, used when there is no `url`. */
  path: string;
  /** SQLite: when a commit reaches the disk (see `OpenDatabaseOptions.synchronous`). */
  sqliteSynchronous?: OpenDatabaseOptions["synchronous"];
  /** @defaultValue "looprun" — PostgreSQL: shown in `pg_stat_activity` */
  applicationName?: string;
  /** @defaultValue 10 — PostgreSQL: connections in the pool */
  maxConnections?: number;
  /** PostgreSQL: a query not answered by then ends its connection (see query-deadline.ts). */
  queryTimeoutMs?: number;
  /** PostgreSQL: an idle pooled connection failed (see `OpenPgDatabaseOptions.onIdleError`). */
  onIdleError?: (error: Error) => void;
}

interface Common {
  /** Where the data is, for people: the file, or the URL without its password. */
  location: string;
  /** Whether the database answers (for /readyz). */
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

/** The store (engine side) and the repository (API side) on one open database. */
export type Storage =
  | (Common & {
      engine: "sqlite";
      database: Database;
      store: SqliteRunStore;
      repo: RunRepository;
    })
  | (Common & {
      engine: "postgres";
      database: PgDatabase;
      store: PgRunStore;
      repo: PgRunRepository;
    });

export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/** The URL with its password (in the authority, or any parameter named as a secret is) masked. */
export function redactUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "(an unparsable URL)";
  }
  if (parsed.password) parsed.password = "xxxxx";
  for (const name of [...new Set(parsed.searchParams.keys())]) {
    if (looksSecret(name)) parsed.searchParams.set(name, "xxxxx");
  }
  return parsed.toString();
}

/**
 * Whether the database the configuration names holds looprun's runs, without making or
 * migrating anything in it (a tool that reads the workers' database must not take another one
 * for it): a SQLite file that is not there does not.
 */
export async function isLooprunDatabaseAt(opts: { url?: string; path: string }): Promise<boolean> {
  if (opts.url === undefined) return isLooprunDatabase(opts.path);
  if (!isPostgresUrl(opts.url)) return false;
  const pg = await import("./pg");
  return pg.hasLooprunTables(opts.url);
}

/** How long /readyz waits for the database's answer. */
const PING_TIMEOUT_MS = 2000;

/**
 * Opens the database the configuration names — PostgreSQL for a URL, else the SQLite file —
 * and applies its migrations (under a lock: any number of processes may start at once).
 * PostgreSQL's driver is loaded only when it is used.
 */
export async function openStorage(opts: OpenStorageOptions): Promise<Storage> {
  if (opts.url !== undefined) {
    if (!isPostgresUrl(opts.url)) {
      throw new Error("the database URL must start with postgres:// or postgresql://");
    }
    const location = redactUrl(opts.url);
    const pg = await import("./pg");
    const database = await pg
      .openPgDatabase(opts.url, {
        ...(opts.applicationName !== undefined ? { applicationName: opts.applicationName } : {}),
        ...(opts.maxConnections !== undefined ? { maxConnections: opts.maxConnections } : {}),
        ...(opts.onIdleError !== undefined ? { onIdleError: opts.onIdleError } : {}),
        ...(opts.queryTimeoutMs !== undefined ? { queryTimeoutMs: opts.queryTimeoutMs } : {}),
      })
      .catch((error: unknown) => {
        throw new Error(`DATABASE_URL: cannot use ${location}: ${messageOf(error)}`, {
          cause: error,
        });
      });
    return {
      engine: "postgres",
      location,
      database,
      store: new pg.PgRunStore(database.db),
      repo: new pg.PgRunRepository(database.db),
      async ping() {
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), PING_TIMEOUT_MS);
        });
        const answer = database.pool.query("select 1").then(
          () => true,
          () => false,
        );
        try {
          return await Promise.race([answer, timeout]);
        } finally {
          clearTimeout(timer);
        }
      },
      close: () => database.close(),
    };
  }
  let database: Database;
  try {
    database = openDatabase(
      opts.path,
      opts.sqliteSynchronous !== undefined ? { synchronous: opts.sqliteSynchronous } : {},
    );
  } catch (error) {
    // "unable to open database file" alone does not say which file, nor where it was set.
    throw new Error(
      `DATABASE_PATH: cannot use ${opts.path} as the SQLite database: ${messageOf(error)}`,
      { cause: error },
    );
  }
  return {
    engine: "sqlite",
    location: opts.path,
    database,
    store: new SqliteRunStore(database.db),
    repo: new RunRepository(database.db),
    async ping() {
      try {
        database.sqlite.prepare("select 1").get();
        return true;
      } catch {
        return false;
      }
    },
    async close() {
      database.close();
    },
  };
}
