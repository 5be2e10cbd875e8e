import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/** A `run_command`'s timeout when the call gives none, and the most it may ask for. */
export const DEFAULT_COMMAND_TIMEOUT_MS = 120_000;

/**
 * After its timeout, what a command may still take before the server reports it: the kill's
 * grace (2 s, SIGTERM then SIGKILL), the wait for its pipes (1 s) and for its process group
 * (2 s), and the answer's way back, with room to spare.
 */
const COMMAND_END_MS = 15_000;

/**
 * The client's timeout for calls to a workspace server whose commands may run
 * `commandTimeoutMs`: longer than a command's own timeout and its kill, so that a command
 * that times out is reported by the server — with its output — not cut off by the client.
 */
export function workspaceCallTimeoutMs(commandTimeoutMs = DEFAULT_COMMAND_TIMEOUT_MS): number {
  return commandTimeoutMs + COMMAND_END_MS;
}

export interface StdioLaunch {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/**
 * The server's entry in looprun's bundle (apps/cli/bin/bundle.js), when this code runs from it:
 * `workspace-server.js` beside this chunk (`import.meta.filename` is the bundle file's own
 * path there; from the sources it is a `.ts`). Looked up at every start: a bundle directory
 * pruned meanwhile falls back to the sources.
 */
function bundledEntry(): string | null {
  const here = import.meta.filename as string | undefined;
  if (here === undefined || !here.endsWith(".js")) return null;
  const entry = join(dirname(here), "workspace-server.js");
  return existsSync(entry) ? entry : null;
}

/**
 * How to start the workspace server for `root` as its own process, ready for a stdio MCP
 * client (`ToolHub`'s `{ name, ...launch }`): the bundled server where looprun runs from its
 * bundle, else the sources through tsx. Everything is absolute — node itself, the loader and
 * the entry file — so it works whatever the current directory is. `env` is the process's (and
 * so its commands') environment; stdio clients add only a few safe variables.
 */
export function workspaceServerLaunch(
  root: string,
  env: Record<string, string>,
  /** @defaultValue DEFAULT_COMMAND_TIMEOUT_MS */
  opts: { commandTimeoutMs?: number } = {},
): StdioLaunch {
  const timeout = opts.commandTimeoutMs === undefined ? [] : [String(opts.commandTimeoutMs)];
  const bundled = bundledEntry();
  if (bundled !== null)
    return { command: process.execPath, args: [bundled, root, ...timeout], env };
  const require = createRequire(import.meta.url);
  const tsxLoader = pathToFileURL(require.resolve("tsx")).href;
  const entry = fileURLToPath(new URL("./workspace-server-main.ts", import.meta.url));
  return { command: process.execPath, args: ["--import", tsxLoader, entry, root, ...timeout], env };
}
