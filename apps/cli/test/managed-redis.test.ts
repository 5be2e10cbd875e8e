import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { type ManagedRedis, startManagedRedis } from "../src/managed-redis";

// `looprun dev`'s managed redis-server when it dies and cannot start again at once: its port
// taken by another process meanwhile. It keeps trying, waiting longer each time, and is back on
// the same port with its data once the port is free.

let dir: string;
let redis: ManagedRedis | null = null;
afterEach(async () => {
  await redis?.stop();
  redis = null;
  rmSync(dir, { recursive: true, force: true });
});

const portOf = (url: string) => Number(new URL(url).port);

/** Resolves once `lines` holds a line matching `pattern`. */
async function logged(lines: string[], pattern: RegExp, timeoutMs = 20_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const line = lines.find((l) => pattern.test(l));
    if (line !== undefined) return line;
    if (Date.now() > deadline) throw new Error(`no line ${pattern} in:\n${lines.join("\n")}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Listens on `port` of 127.0.0.1 as soon as it is free (its Redis just died). */
async function takePort(port: number): Promise<Server> {
  for (let tries = 0; ; tries++) {
    const server = createServer();
    try {
      await new Promise<void>((listening, failed) => {
        server.once("error", failed);
        server.listen(port, "127.0.0.1", listening);
      });
      return server;
    } catch (error) {
      if (tries > 200) throw error;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }
}

describe("the managed redis-server", () => {
  it("is started again, with a growing wait, while its port is taken; then with its data", async () => {
    dir = mkdtempSync(join(tmpdir(), "looprun-managed-redis-"));
    const lines: string[] = [];
    redis = await startManagedRedis(join(dir, "redis"), (line) => lines.push(line));
    const port = portOf(redis.url);
    const client = new Redis(redis.url, { maxRetriesPerRequest: null, lazyConnect: true });
    await client.connect();
    // Written to the append-only file (fsync every second by default: SAVE-less, so wait).
    await client.set("kept", "across the restarts");
    await new Promise((resolve) => setTimeout(resolve, 1200));
    const pid = Number(/process_id:(\d+)/.exec(await client.info("server"))?.[1]);
    client.disconnect();

    // Killed young, it is started again after 250 ms: the port is taken before that.
    process.kill(pid, "SIGKILL");
    const squatter = await takePort(port);
    await logged(lines, /exited \(SIGKILL\); starting it again on port \d+ in 250 ms/);
    const failed = await logged(lines, /could not start the managed redis-server again/);
    expect(failed).toMatch(/trying again in 500 ms/);
    await new Promise<void>((closed) => squatter.close(() => closed()));
    await logged(lines, new RegExp(`running again on port ${port}`));

    const back = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    try {
      expect(await back.get("kept")).toBe("across the restarts");
      const newPid = Number(/process_id:(\d+)/.exec(await back.info("server"))?.[1]);
      expect(newPid).not.toBe(pid);
      // One redis-server on the port: the failed starts left none behind.
      const servers = execFileSync("pgrep", ["-f", `redis-server 127.0.0.1:${port}`], {
        encoding: "utf8",
      })
        .trim()
        .split("\n");
      expect(servers).toEqual([String(newPid)]);
    } finally {
      back.disconnect();
    }
  }, 40_000);
});
