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

/**
 * Starts a local redis-server for the dev stack, with its data (AOF) under `dir`, so queued
 * runs survive a restart of `looprun dev`.
 */
export async function startManagedRedis(dir: string): Promise<ManagedRedis> {
  if (!hasRedisServer()) {
    throw new Error(
      `redis-server was not found on PATH. Install it with:\n  ${redisInstallHint()}`,
    );
  }
  const dataDir = resolve(dir);
  mkdirSync(dataDir, { recursive: true });
  const port = await freePort();
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
  return {
    url: `redis://127.0.0.1:${port}`,
    dir: dataDir,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((done) => child.once("exit", done));
      child.kill("SIGTERM");
      await exited;
    },
  };
}
