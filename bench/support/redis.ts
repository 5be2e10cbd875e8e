import { type BenchProcess, freePort, spawnTracked, tempDir } from "./processes";

export interface BenchRedis {
  url: string;
  port: number;
  process: BenchProcess;
}

/** A throwaway redis-server on a free loopback port (no persistence, noeviction as BullMQ needs). */
export async function startRedis(): Promise<BenchRedis> {
  const port = await freePort();
  const dir = tempDir("looprun-bench-redis-");
  const proc = spawnTracked(
    "redis-server",
    "redis-server",
    [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--dir",
      dir,
      "--save",
      "",
      "--appendonly",
      "no",
      "--maxmemory-policy",
      "noeviction",
    ],
    { env: { PATH: process.env.PATH } },
  );
  await proc.waitForLine((line) => line.includes("Ready to accept connections"), 15_000);
  return { url: `redis://127.0.0.1:${port}`, port, process: proc };
}
