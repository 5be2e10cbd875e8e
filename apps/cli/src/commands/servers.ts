import { dirname, join } from "node:path";
import { redactUrl } from "@looprun/db";
import { DEFAULT_API_URL } from "../env";
import { shutdownOnSignals } from "../lifecycle";
import { startManagedRedis } from "../managed-redis";

// Each command imports only the app it starts: an API process does not load the worker's engine,
// agents and MCP client, nor a worker the API's routes, dashboard and OpenAPI schemas (idle RSS).
const loadApi = () => import("@looprun/api");
const loadWorker = () => import("@looprun/worker");

export async function apiCommand(): Promise<void> {
  const shutdown = shutdownOnSignals();
  const { parseApiEnv, startApi } = await loadApi();
  const api = await startApi(parseApiEnv(process.env));
  shutdown.closeWith(() => api.close());
  process.stdout.write(`looprun API listening on ${api.url}\n`);
}

export async function workerCommand(): Promise<void> {
  const shutdown = shutdownOnSignals();
  const { parseWorkerEnv, startWorker } = await loadWorker();
  const worker = await startWorker(parseWorkerEnv(process.env));
  shutdown.closeWith(() => worker.close());
}

/** Everything on one machine: a managed redis-server (unless REDIS_URL is set), the API and workers. */
export async function devCommand(): Promise<void> {
  const shutdown = shutdownOnSignals();
  const [{ parseApiEnv, startApi }, { parseWorkerEnv, startWorker }] = await Promise.all([
    loadApi(),
    loadWorker(),
  ]);
  const env = { ...process.env };
  env.LOG_LEVEL ??= "warn";
  // Empty counts as unset: the managed Redis, whose URL replaces the default parsed here.
  if (!env.REDIS_URL) delete env.REDIS_URL;
  // A bad setting stops it before anything starts.
  const apiEnv = parseApiEnv(env);
  const workerEnv = parseWorkerEnv(env);
  let redisNote = "(from REDIS_URL)";
  // The managed Redis keeps its data next to the database, as the snapshots do (`.looprun/redis`).
  const redisDir = join(dirname(apiEnv.DATABASE_PATH), "redis");
  const redis = env.REDIS_URL ? null : await startManagedRedis(redisDir);
  const stopRedis = async () => {
    await redis?.stop();
  };
  shutdown.closeWith(stopRedis);
  if (redis) {
    apiEnv.REDIS_URL = redis.url;
    workerEnv.REDIS_URL = redis.url;
    redisNote = `(managed redis-server, data in ${redis.dir})`;
  }
  // One that fails to start (its port taken, say) takes what started before it with it.
  const api = await startApi(apiEnv).catch(async (error: unknown) => {
    await stopRedis();
    throw error;
  });
  const stopApi = async () => {
    await api.close();
    await stopRedis();
  };
  shutdown.closeWith(stopApi);
  // The environment the worker's commands draw on: without the API's own settings (its
  // timers), as the worker hides its own — nor the CLI's (LOOPRUN_TSX); one listed in
  // AGENT_ENV_ALLOWLIST passes, as the worker's own do.
  const allowed = new Set(workerEnv.AGENT_ENV_ALLOWLIST);
  const apiSettings = new Set(
    [...Object.keys(apiEnv).filter((name) => name.startsWith("LOOPRUN_")), "LOOPRUN_TSX"].filter(
      (name) => !allowed.has(name),
    ),
  );
  const commandSource = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !apiSettings.has(name)),
  );
  const worker = await startWorker(workerEnv, commandSource).catch(async (error: unknown) => {
    await api.close().catch(() => {});
    await stopRedis();
    throw error;
  });
  shutdown.closeWith(async () => {
    await worker.close();
    await stopApi();
  });
  // Stopped while it started: no banner that says to press Ctrl-C.
  if (shutdown.stopping) return;
  // The CLI talks to DEFAULT_API_URL unless told: elsewhere (PORT, HOST) the suggestion says where.
  const urlPrefix = api.url === DEFAULT_API_URL ? "" : `LOOPRUN_URL=${api.url} `;
  process.stdout.write(
    [
      "",
      "looprun is running",
      `  Dashboard  ${api.url}/`,
      `  API        ${api.url}/api  (OpenAPI: ${api.url}/api/openapi.json, metrics: ${api.url}/metrics)`,
      `  Redis      ${redactUrl(apiEnv.REDIS_URL)} ${redisNote}`,
      `  Database   ${api.database}`,
      `  Workspaces ${apiEnv.WORKSPACES_ROOT}`,
      `  Workers    ${workerEnv.WORKER_CONCURRENCY} concurrent runs`,
      "",
      "Submit a run from another terminal:",
      `  ${urlPrefix}npx looprun submit --task "say hello" --agent "echo hello > hello.txt" --test "grep -q hello hello.txt" --watch`,
      "Press Ctrl-C to stop.",
      "",
    ].join("\n"),
  );
}
