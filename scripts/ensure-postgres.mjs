#!/usr/bin/env node
// Makes sure PostgreSQL's server binaries are there before `npm test`: the PostgreSQL store's
// tests start a throwaway cluster of their own (initdb into a temporary directory, a free
// port), so they need `initdb` and `pg_ctl`, not a running server. Where they are missing and
// this machine can install them (root with apt-get), installs Debian's `postgresql` package and
// says so; elsewhere stops with the exact command to run. LOOPRUN_TEST_POSTGRES_URL (a
// superuser URL of a server the tests may create databases on) makes them unnecessary.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";

if (process.env.LOOPRUN_TEST_POSTGRES_URL) process.exit(0);

const has = (cmd, args = ["--version"]) => spawnSync(cmd, args, { stdio: "ignore" }).status === 0;

/** The same search as tests/support/postgres.ts: pg_config, then Debian's versioned dirs. */
function hasInitdb() {
  const config = spawnSync("pg_config", ["--bindir"], { encoding: "utf8" });
  if (config.status === 0 && existsSync(join(config.stdout.trim(), "initdb"))) return true;
  const root = "/usr/lib/postgresql";
  return existsSync(root) && readdirSync(root).some((v) => existsSync(join(root, v, "bin/initdb")));
}

if (hasInitdb()) process.exit(0);

const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
if (process.platform === "linux" && isRoot && has("apt-get", ["--version"])) {
  console.error(
    "looprun: PostgreSQL's initdb not found; installing Debian's postgresql (apt-get install -y postgresql)…",
  );
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const run = (args) => spawnSync("apt-get", args, { stdio: "inherit", env }).status === 0;
  if (run(["update", "-qq"]) && run(["install", "-y", "-qq", "postgresql"]) && hasInitdb()) {
    console.error("looprun: postgresql installed (the tests start their own cluster).");
    process.exit(0);
  }
  console.error("looprun: installing postgresql failed (see above).");
  process.exit(1);
}

const hint =
  process.platform === "darwin" ? "brew install postgresql" : "sudo apt-get install -y postgresql";
console.error(
  [
    "looprun: PostgreSQL's server binaries (initdb, pg_ctl) were not found. Install them, then run the tests again:",
    `  ${hint}`,
    "(the tests start their own throwaway cluster on a free port; or set LOOPRUN_TEST_POSTGRES_URL",
    " to a superuser URL of a server they may create databases on)",
  ].join("\n"),
);
process.exit(1);
