export { buildCommandEnv } from "./command-env";
export { type Launched, type LaunchOptions, launch, useLauncher } from "./launch";
export type { CommandResult, RunCommandOptions } from "./run-command";
export { runCommand } from "./run-command";
export { TailBuffer } from "./tail-buffer";
