export { buildCommandEnv } from "./command-env";
export { useLauncher } from "./launch";
export { posixSpawnUnavailable } from "./posix-launch";
export type { CommandResult, RunCommandOptions } from "./run-command";
export { runCommand } from "./run-command";
export { TailBuffer } from "./tail-buffer";
