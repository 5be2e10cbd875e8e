// Entry point of the workspace MCP server as its own process (see `workspaceServerLaunch`):
// `node --import tsx workspace-server-main.ts DIR [COMMAND_TIMEOUT_MS]`, or `node
// workspace-server.js DIR …` from looprun's bundle. Its environment is already the minimal one
// its launcher chose, and becomes the environment of the commands it runs.
import { existsSync, statSync } from "node:fs";
import { serveWorkspaceOverStdio } from "./serve-workspace-stdio";

const root = process.argv[2];
if (!root || !existsSync(root) || !statSync(root).isDirectory()) {
  process.stderr.write(
    `workspace-server: the workspace directory ${root ?? "(missing)"} does not exist\n`,
  );
  process.exit(2);
}

const commandEnv: Record<string, string> = {};
for (const [name, value] of Object.entries(process.env)) {
  if (value !== undefined) commandEnv[name] = value;
}

const timeoutArg = Number(process.argv[3]);
const commandTimeoutMs = Number.isInteger(timeoutArg) && timeoutArg > 0 ? timeoutArg : undefined;

const served = await serveWorkspaceOverStdio({
  root,
  commandEnv,
  ...(commandTimeoutMs !== undefined ? { commandTimeoutMs } : {}),
});
const shutdown = () => {
  served.close().finally(() => process.exit(0));
};
process.once("SIGTERM", shutdown);
process.once("SIGINT", shutdown);
await served.closed;
process.exit(0);
