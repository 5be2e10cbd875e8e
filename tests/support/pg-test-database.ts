import { inject } from "vitest";
import { createDatabase } from "./postgres";

/**
 * The superuser URL of the test run's PostgreSQL (global-setup.ts). Without one the
 * PostgreSQL suites fail with the reason — they are never skipped in silence.
 */
export function postgresAdminUrl(): string {
  const url = inject("postgresUrl");
  if (!url)
    throw new Error(`PostgreSQL is not available for the tests: ${inject("postgresError")}`);
  return url;
}

/** A new, empty database on the test run's cluster (migrated by whoever opens it first). */
export function freshPostgresDatabase(
  prefix?: string,
): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  return createDatabase(postgresAdminUrl(), prefix);
}
