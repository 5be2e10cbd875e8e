import { createDatabase, type PostgresCluster, startPostgres } from "../../tests/support/postgres";

/**
 * One PostgreSQL cluster for the bench's PostgreSQL scenarios (issue 10: figures beside
 * SQLite's), started on first use and stopped at the end: Debian's server binaries, a data
 * directory under a temp dir, a free port, and — unlike the tests' cluster — durable
 * settings (fsync, synchronous commit, full page writes on), as a deployment would run.
 */
let cluster: Promise<PostgresCluster> | null = null;

export const POSTGRES_NOTE =
  "PostgreSQL: a throwaway cluster of Debian's server binaries (PostgreSQL 15 here) on 127.0.0.1, default settings but for max_connections=300, fsync and synchronous commit on (durable, as SQLite's synchronous=FULL); the API's pool has DATABASE_POOL_SIZE=10 connections (the default).";

function benchCluster(): Promise<PostgresCluster> {
  cluster ??= startPostgres({ durable: true });
  return cluster;
}

/** A new database on the bench's cluster; `drop` removes it. */
export async function benchPostgresDatabase(
  prefix: string,
): Promise<{ url: string; drop(): Promise<void> }> {
  const { adminUrl } = await benchCluster();
  return createDatabase(adminUrl, `bench_${prefix}`);
}

/** Stops the cluster if one was started. */
export async function stopBenchPostgres(): Promise<void> {
  const started = cluster;
  cluster = null;
  if (started) await (await started).stop();
}
