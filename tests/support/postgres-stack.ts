import { inject } from "vitest";
import { useFixture } from "./fixture";
import { createDatabase, type PostgresCluster, startPostgres } from "./postgres";
import { type Stack, startStack } from "./stack";

/**
 * For a file whose tests stop, stall or restart PostgreSQL: a cluster of its own (the other
 * files share theirs), a database `name` on it and a stack with `env` on that database — made
 * before the file's tests (initdb takes a while: up to 2 min), stopped after them (a frozen
 * cluster thawed first).
 */
export function usePrivatePostgresStack(
  name: string,
  env: Record<string, string>,
): { readonly cluster: PostgresCluster; readonly stack: Stack } {
  return useFixture(
    "the PostgreSQL cluster and its stack",
    async () => {
      const cluster = await startPostgres();
      try {
        const database = await createDatabase(cluster.adminUrl, name);
        const stack = await startStack({
          redisUrl: inject("redisUrl"),
          databaseUrl: database.url,
          env,
        });
        return { cluster, stack };
      } catch (error) {
        await cluster.stop();
        throw error;
      }
    },
    async ({ cluster, stack }) => {
      await cluster.thaw();
      await stack.stop();
      await cluster.stop();
    },
    { timeoutMs: 120_000 },
  );
}
