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
