import { statSync } from "node:fs";
import { resolve } from "node:path";
import { Command } from "commander";
import { fail, shutdownOnSignals } from "../lifecycle";

async function serveWorkspace(dir: string, options: { commandTimeout?: string }): Promise<void> {
  const root = resolve(dir);
  let isDirectory = false;
  try {
    isDirectory = statSync(root).isDirectory();
  } catch {
    // reported below
  }
  if (!isDirectory) fail(`workspace directory ${root} does not exist`);
  // Loaded here, not at the top: every other command (api, worker, submit…) would pay for them.
  const [{ buildCommandEnv, serveWorkspaceOverStdio }, { WorkerEnv }] = await Promise.all([
    import("@looprun/core"),
    import("@looprun/worker"),
  ]);
  const timeout = options.commandTimeout === undefined ? undefined : Number(options.commandTimeout);
  if (timeout !== undefined && !(Number.isInteger(timeout) && timeout > 0)) {
    fail("--command-timeout must be a positive number of milliseconds");
  }
  const allowlist = WorkerEnv.shape.AGENT_ENV_ALLOWLIST.safeParse(process.env.AGENT_ENV_ALLOWLIST);
  if (!allowlist.success) fail(`AGENT_ENV_ALLOWLIST: ${allowlist.error.issues[0]?.message}`);
  const shutdown = shutdownOnSignals();
  // Commands see the same minimal environment as the worker gives them, never our secrets.
  const served = await serveWorkspaceOverStdio({
    root,
    commandEnv: buildCommandEnv(process.env, allowlist.data),
    commandTimeoutMs: timeout,
  });
  shutdown.closeWith(() => served.close());
  await served.closed;
  process.exit(0);
}

/** `looprun mcp …`: looprun's MCP servers, served over stdio for any MCP client. */
export function mcpCommand(): Command {
  const mcp = new Command("mcp").description("serve looprun's MCP servers over stdio");
  mcp
    .command("workspace <dir>")
    .description("the workspace server: files and shell commands confined to DIR")
    .option("--command-timeout <ms>", "default and maximum timeout of run_command (default 120000)")
    .action(serveWorkspace);
  return mcp;
}
