// Builds the posix_spawn addon (src/posix_spawn.c) at install, with the node-gyp npm ships.
// Linux only (it uses pidfd_open). A machine that cannot build it still installs: looprun then
// spawns commands through its launcher process instead (packages/core/src/process/launch.ts).
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
if (process.platform !== "linux") {
  console.warn("@looprun/spawn: not Linux, no addon built (commands go through the launcher)");
  process.exit(0);
}
const bundled = join(
  dirname(process.execPath),
  "../lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js",
);
const gyp = process.env.npm_config_node_gyp || (existsSync(bundled) ? bundled : null);
// Node's own headers when npm names none (offline, node-gyp would download them).
const prefix = join(dirname(process.execPath), "..");
const headers =
  !process.env.npm_config_nodedir && existsSync(join(prefix, "include/node/node_api.h"))
    ? [`--nodedir=${prefix}`]
    : [];
const [command, args] = gyp
  ? [process.execPath, [gyp, "rebuild", ...headers]]
  : ["node-gyp", ["rebuild", ...headers]];
const result = spawnSync(command, args, { cwd: here, stdio: "inherit" });
if (result.status !== 0) {
  const why = result.error
    ? `node-gyp could not be run (${result.error.message})`
    : "node-gyp failed (it needs a C compiler, make and python3)";
  console.warn(
    `@looprun/spawn: the addon was not built: ${why}; commands go through the launcher process instead`,
  );
}
