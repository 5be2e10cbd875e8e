import type {} from "vitest";
import type { TestProject } from "vitest/node";
import { type PostgresCluster, startPostgres } from "./postgres";
import { startRedis } from "./redis-server";

declare module "vitest" {
  export interface ProvidedContext {
    redisUrl: string;
    /** A superuser URL of the test run's PostgreSQL cluster; "" when it could not start. */
    postgresUrl: string;
    /** Why there is no cluster: the PostgreSQL suites fail with it (they never skip). */
    postgresError: string;
  }
}

/** One redis-server for the whole test run; each test file uses its own queue prefix. */
export default async function setup(project: TestProject) {
  const starting = startTestPostgres();
  const redis = await startRedis().catch(async (error: unknown) => {
    await (await starting).cluster?.stop();
    throw error;
  });
  const postgres = await starting;
  project.provide("redisUrl", redis.url);
  project.provide("postgresUrl", postgres.url);
  project.provide("postgresError", postgres.error);
  return async () => {
    await Promise.all([redis.stop(), postgres.cluster?.stop()]);
  };
}

/**
 * One PostgreSQL cluster for the test run (each test file creates its own database on it), or
 * the server of LOOPRUN_TEST_POSTGRES_URL. Without PostgreSQL the other suites still run.
 */
async function startTestPostgres(): Promise<{
  url: string;
  error: string;
  cluster?: PostgresCluster;
}> {
  const external = process.env.LOOPRUN_TEST_POSTGRES_URL;
  if (external) return { url: external, error: "" };
  try {
    const cluster = await startPostgres();
    return { url: cluster.adminUrl, error: "", cluster };
  } catch (error) {
    return { url: "", error: error instanceof Error ? error.message : String(error) };
  }
}
