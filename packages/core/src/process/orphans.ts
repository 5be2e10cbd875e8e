import { readdirSync, readFileSync } from "node:fs";

function processGroupOf(pid: string): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // "pid (comm) state ppid pgrp …": comm may hold spaces or parentheses.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(fields[2]);
  } catch {
    return null;
  }
}

function belongsToRun(pid: string, runId: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(`LOOPRUN_RUN_ID=${runId}`);
  } catch {
    return false;
  }
}

/**
 * Kills what a crashed worker left running for a run: the process group it recorded, but only
 * if a process of that group still carries the run's `LOOPRUN_RUN_ID` (a reused pid is never
 * killed). Returns whether it killed anything. Linux only (it reads /proc); elsewhere a no-op.
 */
export function killOrphanedGroup(pgid: number, runId: string): boolean {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return false;
  }
  const ours = entries.some((pid) => /^\d+$/.test(pid) && processGroupOf(pid) === pgid && belongsToRun(pid, runId));
  if (!ours) return false;
  try {
    process.kill(-pgid, "SIGKILL");
    return true;
  } catch {
    return false;
  }
}
