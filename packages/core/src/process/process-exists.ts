/**
 * Whether a process with this pid runs on this host (in this pid namespace) — for files named
 * after the process that made them, which a process that is gone no longer uses.
 */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, as another user's.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Whether `name` — `<prefix><pid>_<rest>` — was made by a process that is gone: not this one,
 * and no process with that pid runs. False for any other name.
 */
export function madeByGoneProcess(name: string, prefix: string): boolean {
  if (!name.startsWith(prefix)) return false;
  const pid = Number(name.slice(prefix.length).split("_")[0]);
  return Number.isInteger(pid) && pid > 0 && pid !== process.pid && !processExists(pid);
}
