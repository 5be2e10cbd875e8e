import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

export interface StdioLaunch {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/**
 * How to start the workspace server for `root` as its own process, ready for a stdio MCP
 * client (`ToolHub`'s `{ name, ...launch }`). Everything is absolute — node itself, the tsx
 * loader and the entry file — so it works whatever the current directory is. `env` is the
 * process's (and so its commands') environment; stdio clients add only a few safe variables.
 */
export function workspaceServerLaunch(root: string, env: Record<string, string>): StdioLaunch {
  const require = createRequire(import.meta.url);
  const tsxLoader = pathToFileURL(require.resolve("tsx")).href;
  const entry = fileURLToPath(new URL("./workspace-server-main.ts", import.meta.url));
  return { command: process.execPath, args: ["--import", tsxLoader, entry, root], env };
}
