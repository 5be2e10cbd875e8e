import { EventEmitter } from "node:events";
import { accessSync, closeSync, constants, openSync } from "node:fs";
import { Socket } from "node:net";
import { constants as os } from "node:os";
import { delimiter, isAbsolute, join, resolve } from "node:path";
import { type PosixSpawn, posixSpawn } from "@looprun/spawn";
import type { Launched, LaunchOptions } from "./launch";

/**
 * Spawning through posix_spawn (the @looprun/spawn addon): the child runs on this process's
 * memory until it execs, so nothing of the worker's heap is copied, however big it is, and no
 * launcher process relays the command (bench/RESULTS.md, the fourteenth session). What the
 * caller gets behaves as the ChildProcess it replaces: `spawn`, then `exit` once it is reaped,
 * then `close` once its output has closed too; `error` alone when it cannot start.
 */

const SIGNAL_NAMES = new Map<number, NodeJS.Signals>(
  Object.entries(os.signals).map(([name, number]) => [number, name as NodeJS.Signals]),
);

/** Whether this process can spawn through posix_spawn. */
export const posixSpawnAvailable = posixSpawn !== null;

let devNull: number | null = null;

/** `file` as a path, looked up in the command's PATH as Node does (execvp's rules). */
function resolveProgram(file: string, env: Record<string, string>, cwd?: string): string {
  if (file.includes("/")) return file;
  const path = env.PATH ?? "/usr/local/bin:/usr/bin:/bin";
  let denied = false;
  for (const dir of path.split(delimiter)) {
    const base = dir === "" ? "." : dir;
    const candidate = join(isAbsolute(base) ? base : resolve(cwd ?? ".", base), file);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EACCES") denied = true;
    }
  }
  const code = denied ? "EACCES" : "ENOENT";
  throw Object.assign(new Error(`spawn ${file} ${code}`), { code, path: file });
}

export function posixLaunch(
  file: string,
  args: readonly string[],
  opts: LaunchOptions,
  notStarted: (error: NodeJS.ErrnoException) => Launched,
): Launched {
  const binding = posixSpawn as PosixSpawn;
  const parentEnds: number[] = [];
  const childEnds: number[] = [];
  const pipe = () => {
    const [read, write] = binding.pipe();
    return [read, write] as const;
  };
  try {
    const program = resolveProgram(file, opts.env, opts.cwd);
    let stdin: number;
    let stdinWrite: number | null = null;
    if (opts.stdinFile !== undefined) {
      stdin = openSync(opts.stdinFile, "r");
      childEnds.push(stdin);
    } else if (opts.stdin) {
      const [read, write] = pipe();
      childEnds.push(read);
      parentEnds.push(write);
      stdin = read;
      stdinWrite = write;
    } else {
      devNull ??= openSync("/dev/null", "r");
      stdin = devNull;
    }
    const [outRead, outWrite] = pipe();
    parentEnds.push(outRead);
    childEnds.push(outWrite);
    const [errRead, errWrite] = pipe();
    parentEnds.push(errRead);
    childEnds.push(errWrite);
    const child = new PosixProcess();
    const pid = binding.spawn(
      program,
      [file, ...args],
      Object.entries(opts.env).map(([name, value]) => `${name}=${value}`),
      opts.cwd ?? null,
      [stdin, outWrite, errWrite],
      opts.detached ?? false,
      (code, signal) =>
        child.exited(code, signal === null ? null : (SIGNAL_NAMES.get(signal) ?? null)),
    );
    // The child has its own copies now.
    for (const fd of childEnds.splice(0)) closeSync(fd);
    parentEnds.length = 0;
    child.started(pid, outRead, errRead, stdinWrite, opts.stdin ?? "");
    return child;
  } catch (error) {
    for (const fd of [...childEnds, ...parentEnds]) closeSync(fd);
    return notStarted(error as NodeJS.ErrnoException);
  }
}

/** A process posix_spawn started, as a ChildProcess shows it. */
class PosixProcess extends EventEmitter implements Launched {
  pid: number | undefined = undefined;
  // Set in started(), before the caller sees this object.
  stdout!: Socket;
  stderr!: Socket;
  private open = 2;
  private status: [number | null, NodeJS.Signals | null] | null = null;
  private closed = false;

  started(pid: number, out: number, err: number, stdinWrite: number | null, input: string): void {
    this.pid = pid;
    this.stdout = this.output(out);
    this.stderr = this.output(err);
    if (stdinWrite !== null) {
      const stdin = new Socket({ fd: stdinWrite, readable: false, writable: true });
      // The process did not read its stdin (EPIPE): not an error of ours.
      stdin.on("error", () => {});
      stdin.end(input);
    }
    process.nextTick(() => this.emit("spawn"));
  }

  exited(code: number | null, signal: NodeJS.Signals | null): void {
    this.status = [code, signal];
    this.emit("exit", code, signal);
    this.maybeClose();
  }

  kill(signal: NodeJS.Signals = "SIGTERM"): boolean {
    // Reaped: the pid may be another process's by now.
    if (this.pid === undefined || this.status !== null) return false;
    try {
      process.kill(this.pid, signal);
      return true;
    } catch {
      return false;
    }
  }

  private output(fd: number): Socket {
    const stream = new Socket({ fd, readable: true, writable: false });
    stream.on("error", () => stream.destroy());
    stream.on("close", () => {
      this.open--;
      this.maybeClose();
    });
    return stream;
  }

  private maybeClose(): void {
    if (this.closed || this.status === null || this.open > 0) return;
    this.closed = true;
    this.emit("close", ...this.status);
  }
}
