import { readFileSync } from "node:fs";

export interface ProcStat {
  /** `R`, `S`, `D`, … — `Z` (a zombie: exited, not yet reaped) and `X` (dead) run nothing. */
  state: string;
  ppid: number;
  pgrp: number;
}

/** A process's state, parent and group from Linux's /proc; `null` when it is gone (or no /proc). */
export function readProcStat(pid: number | string): ProcStat | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return null;
  }
  // "pid (comm) state ppid pgrp …" — comm may hold spaces and parentheses.
  const [state = "", ppid, pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { state, ppid: Number(ppid), pgrp: Number(pgrp) };
}

/** Whether a process with this /proc state still runs. */
export const runs = (stat: ProcStat): boolean => stat.state !== "Z" && stat.state !== "X";
