import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { availableParallelism, loadavg, release, totalmem, type } from "node:os";
import { REPO_ROOT } from "./processes";

export interface MachineInfo {
  cpu: string;
  cores: number;
  memoryGb: number;
  os: string;
  node: string;
  redis: string;
  commit: string;
  dirty: boolean;
  loadAvg: number[];
}

function run(command: string, args: string[], cwd = REPO_ROOT): string {
  try {
    return execFileSync(command, args, { cwd, encoding: "utf8" }).trim();
  } catch {
    return "unknown";
  }
}

/**
 * The machine, and the commit of the checkout measured (`root`: see `--root`). A results file
 * this bench writes does not make it dirty.
 */
export function machineInfo(root = REPO_ROOT): MachineInfo {
  let cpu = "unknown";
  try {
    cpu =
      /^model name\s*:\s*(.+)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1]?.trim() ?? cpu;
  } catch {
    // not Linux
  }
  const redis = /v=(\S+)/.exec(run("redis-server", ["--version"]))?.[1] ?? "unknown";
  return {
    cpu,
    cores: availableParallelism(),
    memoryGb: totalmem() / 1024 ** 3,
    os: `${type()} ${release()}`,
    node: process.version,
    redis,
    commit: run("git", ["rev-parse", "--short", "HEAD"], root),
    dirty: run("git", ["status", "--porcelain", "--", ".", ":!bench/RESULTS.md"], root).length > 0,
    loadAvg: loadavg(),
  };
}

/** The 1-minute load average. */
export function load1(): number {
  return loadavg()[0] ?? Number.NaN;
}
