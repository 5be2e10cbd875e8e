import { readdirSync, readFileSync } from "node:fs";
import { readProcStat } from "./proc-stat";

function processGroupOf(pid: string): number | null {
  return readProcStat(pid)?.pgrp ?? null;
}

/** The variable that marks every process started for a run (commands, MCP servers). */
export const RUN_ID_VARIABLE = "LOOPRUN_RUN_ID";

function belongsToRun(pid: string, runId: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, "utf8")
      .split("\0")
      .includes(`${RUN_ID_VARIABLE}=${runId}`);
  } catch {
    return false;
  }
}

function kill(target: number): boolean {
  try {
    process.kill(target, "SIGKILL");
    return true;
  } catch {
    return false;
  }
}

/**
 * Kills what a crashed worker left running for a run: every process that carries the run's
 * `LOOPRUN_RUN_ID` — with its whole process group when the group is the run's (the recorded
 * `pgid`, or a group whose leader carries the run id: commands run in their own group). A
 * worker that died before it recorded its command's group leaves it unrecorded, hence the
 * search by run id. Processes of other runs and reused pids are never killed, nor this
 * process's group. Returns whether it killed anything. Linux only (it reads /proc); elsewhere
 * a no-op.
 */
export function killOrphanedGroup(pgid: number | null, runId: string): boolean {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return false;
  }
  const ownGroup = processGroupOf(String(process.pid));
  const groups = new Set<number>();
  const loners = new Set<number>();
  for (const pid of entries) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid || !belongsToRun(pid, runId)) continue;
    const group = processGroupOf(pid);
    if (group === null) continue;
    const runsGroup =
      group > 1 &&
      group !== ownGroup &&
      (group === pgid || group === Number(pid) || belongsToRun(String(group), runId));
    if (runsGroup) groups.add(group);
    else loners.add(Number(pid));
  }
  let killed = false;
  for (const group of groups) killed = kill(-group) || killed;
  for (const pid of loners) killed = kill(pid) || killed;
  return killed;
}

/**
 * Kills what is left of a run's processes on this host, if it ever started (a run that never
 * started ran nothing, and the search reads every process's environment).
 */
export function killRunOrphans(run: {
  id: string;
  startedAt: number | null;
  activePgid: number | null;
}): boolean {
  return run.startedAt !== null && killOrphanedGroup(run.activePgid, run.id);
}
