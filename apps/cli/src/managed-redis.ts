import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { createServer } from "node:net";
import { resolve } from "node:path";

export interface ManagedRedis {
  url: string;
  dir: string;
  stop(): Promise<void>;
}

/** The exact command that installs redis-server on this kind of machine. */
export function redisInstallHint(): string {
  if (process.platform === "darwin") return "brew install redis";
  return "sudo apt-get install -y redis-server   (or: docker compose up -d redis, then set REDIS_URL=redis://127.0.0.1:6379)";
}

export function hasRedisServer(): boolean {
  return spawnSync("redis-server", ["--version"], { stdio: "ignore" }).status === 0;
}

async function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const server = createServer();
    server.on("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => ok(port));
    });
  });
}

/** The redis-server of the dev stack on `port`, its data (AOF) under `dataDir`; resolves once ready. */
async function launch(port: number, dataDir: string): Promise<ChildProcess> {
  const child: ChildProcess = spawn(
    "redis-server",
    [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--dir",
      dataDir,
      "--appendonly",
      "yes",
      "--save",
      "",
      "--maxmemory-policy",
      "noeviction",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  // However this process ends before stop() — a signal while it still starts, an uncaught error —
  // its Redis ends with it (SIGTERM: Redis writes its append-only file and exits by itself).
  const stopOnExit = () => child.kill("SIGTERM");
  process.on("exit", stopOnExit);
  child.once("exit", () => process.off("exit", stopOnExit));
  await new Promise<void>((ready, fail) => {
    let out = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes("Ready to accept connections")) ready();
    });
    child.once("error", fail);
    child.once("exit", (code) => fail(new Error(`redis-server exited with code ${code}:\n${out}`)));
  });
  child.stdout?.resume();
  return child;
}

/** Waits before starting it again after `failures` short lives or failed starts in a row: up to 5 s. */
const backoffMs = (failures: number) => Math.min(5_000, 250 * 2 ** (failures - 1));

/**
 * Starts a local redis-server for the dev stack, with its data (AOF) under `dir`, so queued
 * runs survive a restart of `looprun dev`. One that dies before stop() (killed, crashed: not
 * a clean shutdown) is started again on the same port and data, which the API and workers
 * reconnect to: managed, it is looprun's to keep running. `log` tells of each restart.
 */
export async function startManagedRedis(
  dir: string,
  log: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
): Promise<ManagedRedis> {
  if (!hasRedisServer()) {
    throw new Error(
      `redis-server was not found on PATH. Install it with:\n  ${redisInstallHint()}`,
    );
  }
  const dataDir = resolve(dir);
  mkdirSync(dataDir, { recursive: true });
  const port = await freePort();
  let child = await launch(port, dataDir);
  let stopping = false;
  /** Short lives and failed starts in a row: how long the next start waits. */
  let failures = 0;
  let pending: NodeJS.Timeout | null = null;

  /** Starts it again after `delayMs`, and again, waiting longer, while it will not start. */
  const restart = (delayMs: number): void => {
    pending = setTimeout(async () => {
      pending = null;
      if (stopping) return;
      try {
        const next = await launch(port, dataDir);
        if (stopping) {
          next.kill("SIGTERM");
          return;
        }
        child = next;
        log(`looprun: the managed redis-server is running again on port ${port}`);
        watch(next);
      } catch (error) {
        failures += 1;
        const wait = backoffMs(failures);
        const why = error instanceof Error ? error.message.split("\n")[0] : String(error);
        log(
          `looprun: could not start the managed redis-server again (${why}); trying again in ${wait} ms`,
        );
        restart(wait);
      }
    }, delayMs);
  };

  const watch = (current: ChildProcess): void => {
    const startedAt = Date.now();
    current.once("exit", (code, signal) => {
      // Exit 0 is a shutdown it was asked for: SIGINT/SIGTERM (a Ctrl-C reaches the whole
      // process group, Redis before looprun's own shutdown may have begun) or SHUTDOWN.
      if (stopping || code === 0) return;
      // After a long life at once; one that keeps dying, later each time.
      failures = Date.now() - startedAt > 10_000 ? 0 : failures + 1;
      const delay = failures === 0 ? 0 : backoffMs(failures);
      log(
        `looprun: the managed redis-server exited (${signal ?? `code ${code}`}); starting it again on port ${port}${delay > 0 ? ` in ${delay} ms` : ""}`,
      );
      restart(delay);
    });
  };
  watch(child);

  return {
    url: `redis://127.0.0.1:${port}`,
    dir: dataDir,
    async stop() {
      stopping = true;
      if (pending !== null) clearTimeout(pending);
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((done) => child.once("exit", done));
      child.kill("SIGTERM");
      await exited;
    },
  };
}
