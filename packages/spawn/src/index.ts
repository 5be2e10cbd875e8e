import { createRequire } from "node:module";

/**
 * The spawn addon (posix_spawn.c: what glibc's posix_spawn does, on a stack it keeps), built at
 * install by build.mjs on Linux. `null` where it was not built or cannot work here (then
 * `unavailable` says why): callers spawn another way.
 */
export interface PosixSpawn {
  /** A pipe: [read end, write end], both close-on-exec. */
  pipe(): [number, number];
  /**
   * Starts `file` (a path: no PATH search) with `argv` (argv[0] included) and `envp`
   * (`NAME=value`), in `cwd`, with the three descriptors as its stdin, stdout and stderr; in a
   * new session (and process group) when `newSession`. Signals start at their defaults,
   * unblocked. `onExit` is called once it has exited and been reaped. Throws an Error with a
   * negative `errno` (as Node's) and the failed call as `syscall` when it cannot start.
   */
  spawn(
    file: string,
    argv: readonly string[],
    envp: readonly string[],
    cwd: string | null,
    stdio: readonly [number, number, number],
    newSession: boolean,
    onExit: (code: number | null, signal: number | null) => void,
  ): number;
  /**
   * Whether the watch of a process it started (until it is reaped) keeps the event loop alive,
   * as a ChildProcess's `ref()` and `unref()`. False when it watches no such process.
   */
  ref(pid: number, on: boolean): boolean;
}

interface Binding extends PosixSpawn {
  usable: boolean;
  reason?: string;
}

function load(): { binding: PosixSpawn | null; unavailable: string | null } {
  if (process.platform !== "linux") return { binding: null, unavailable: "not Linux" };
  let binding: Binding;
  try {
    binding = createRequire(import.meta.url)("../build/Release/looprun_spawn.node") as Binding;
  } catch (error) {
    return { binding: null, unavailable: `not built (${(error as Error).message.split("\n")[0]})` };
  }
  if (!binding.usable) return { binding: null, unavailable: binding.reason ?? "unusable" };
  return { binding, unavailable: null };
}

const loaded = load();

export const posixSpawn: PosixSpawn | null = loaded.binding;
/** Why `posixSpawn` is null. */
export const unavailable: string | null = loaded.unavailable;
