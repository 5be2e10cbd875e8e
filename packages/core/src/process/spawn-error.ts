import { existsSync } from "node:fs";

/**
 * Why a process could not start, said plainly: a missing working directory comes back from
 * spawn as ENOENT naming the program (`spawn /bin/sh ENOENT`), as if the shell were missing —
 * typically a workspace an agent removed.
 */
export function spawnErrorMessage(error: Error, cwd: string | undefined): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ENOENT" && cwd !== undefined && !existsSync(cwd)) {
    return `its working directory ${cwd} does not exist (removed?)`;
  }
  return error.message;
}
