#!/usr/bin/env node
// looprun runs its TypeScript sources directly: no build step to forget. The server commands run
// them as a bundle built at start (see bundle.js); the others, and any command with
// LOOPRUN_TSX=1, through tsx.
const SERVER_COMMANDS = ["api", "worker", "dev"];

const bundled =
  SERVER_COMMANDS.includes(process.argv[2]) && process.env.LOOPRUN_TSX !== "1"
    ? await (await import("./bundle.js")).bundle(new URL("../src/main.ts", import.meta.url))
    : null;
if (bundled) {
  await import(bundled);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("../src/main.ts");
}
