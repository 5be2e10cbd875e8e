#!/usr/bin/env node
// Makes sure redis-server is on PATH before `npm start` / `npm test`. Where it is missing and
// this machine can install it (root with apt-get), installs Debian's package and says so;
// elsewhere stops with the exact command to run.
import { spawnSync } from "node:child_process";

const forTests = process.argv.includes("--for-tests");
const has = (cmd, args = ["--version"]) => spawnSync(cmd, args, { stdio: "ignore" }).status === 0;

// `npm start` with REDIS_URL set uses that Redis; tests always start their own redis-server.
if (!forTests && process.env.REDIS_URL) process.exit(0);
if (has("redis-server")) process.exit(0);

const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
if (process.platform === "linux" && isRoot && has("apt-get", ["--version"])) {
  console.error(
    "looprun: redis-server not found; installing Debian's redis-server (apt-get install -y redis-server)…",
  );
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const run = (args) => spawnSync("apt-get", args, { stdio: "inherit", env }).status === 0;
  if (
    run(["update", "-qq"]) &&
    run(["install", "-y", "-qq", "redis-server"]) &&
    has("redis-server")
  ) {
    console.error("looprun: redis-server installed.");
    process.exit(0);
  }
  console.error("looprun: installing redis-server failed (see above).");
  process.exit(1);
}

const hint =
  process.platform === "darwin" ? "brew install redis" : "sudo apt-get install -y redis-server";
console.error(
  [
    "looprun: redis-server was not found on PATH. Install it, then run the command again:",
    `  ${hint}`,
    forTests
      ? "(the tests start their own redis-server on a free port)"
      : "or run Redis in Docker and point looprun at it:\n  docker compose up -d redis && REDIS_URL=redis://127.0.0.1:6379 npm start",
  ].join("\n"),
);
process.exit(1);
