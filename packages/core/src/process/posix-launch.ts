import { EventEmitter } from "node:events";
import { accessSync, closeSync, constants, openSync, statSync } from "node:fs";
import { Socket } from "node:net";
import { constants as os } from "node:os";
import { delimiter, isAbsolute, join, resolve } from "node:path";
import { Readable, Writable } from "node:stream";
import { type PosixSpawn, posixSpawn, unavailable } from "@looprun/spawn";
import type { Launched, LaunchOptions } from "./launch";

/**
 * Spawning through posix_spawn (the @looprun/spawn addon): the child runs on this process's
 * memory until it execs, so nothing of the worker's heap is copied, however big it is, and no
 * launcher process relays the command (bench/RESULTS.md, the fourteenth session). What the
 * caller gets behaves as the ChildProcess it replaces: `spawn`, then `exit` once it is reaped,
 * then `close` once its output has closed too; `error` alone when it cannot start.
 */

/** Whether this process can spawn through posix_spawn; if not, why not. */
export const posixSpawnAvailable = posixSpawn !== null;
export const posixSpawnUnavailable: string | null = unavailable;

/** A number's first name, as Node reports it (SIGABRT, not its alias SIGIOT). */
function namesOf<N extends string>(table: Record<string, number>): Map<number, N> {
  const names = new Map<number, N>();
  for (const [name, number] of Object.entries(table)) {
    if (!names.has(number)) names.set(number, name as N);
  }
  return names;
}
const SIGNAL_NAMES = namesOf<NodeJS.Signals>(os.signals);
const ERRNO_NAMES = namesOf<string>(os.errno);

let devNull: number | null = null;

/** An error as Node's spawn gives it: `spawn FILE CODE`, with `code`, `errno` and `path`. */
function spawnError(file: string, code: string, errno?: number): NodeJS.ErrnoException {
  return Object.assign(new Error(`spawn ${file} ${code}`), {
    code,
    ...(errno !== undefined ? { errno } : {}),
    syscall: `spawn ${file}`,
    path: file,
  });
}

/** The addon's error (an errno, no code), named as Node names it; any other as it is. */
function namedError(file: string, error: unknown): NodeJS.ErrnoException {
  const { errno, code } = error as NodeJS.ErrnoException;
  if (typeof errno !== "number" || errno >= 0 || code !== undefined) {
    return error as NodeJS.ErrnoException;
  }
  return spawnError(file, ERRNO_NAMES.get(-errno) ?? `E${-errno}`, errno);
}

/** `file` as a path, looked up in the command's PATH as Node does (execvp's rules). */
function resolveProgram(file: string, env: Record<string, string>, cwd?: string): string {
  if (file.includes("/")) return file;
  let denied = false;
  for (const dir of (env.PATH ?? "/usr/bin:/bin").split(delimiter)) {
    const base = dir === "" ? "." : dir;
    const candidate = join(isAbsolute(base) ? base : resolve(cwd ?? ".", base), file);
    try {
      // A directory of that name is passed over, as execvp does.
      if (!statSync(candidate).isFile()) continue;
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EACCES") denied = true;
    }
  }
  throw spawnError(file, denied ? "EACCES" : "ENOENT");
}

/** A process whose stdin stays open for its caller (see launchKept). */
export interface KeptProcess extends Launched {
  /** Its stdin, open until the caller ends it. */
  readonly stdin: Writable;
  /** Whether the process and its pipes keep this process alive, as a ChildProcess's ref. */
  setRef(on: boolean): void;
}

/**
 * Starts `file args` through posix_spawn with its stdin a pipe the caller keeps writing to (see
 * `launchKept` in launch.ts). A process that cannot start emits `error`, as Node's does.
 */
export function posixLaunchKept(
  file: string,
  args: readonly string[],
  opts: Pick<LaunchOptions, "cwd" | "env">,
): KeptProcess {
  const notStarted = (error: NodeJS.ErrnoException) => new PosixProcess().notStarted(error);
  return posixLaunch(file, args, { ...opts, keepStdin: true }, notStarted) as PosixProcess;
}

export function posixLaunch(
  file: string,
  args: readonly string[],
  opts: LaunchOptions & { keepStdin?: boolean },
  notStarted: (error: NodeJS.ErrnoException) => Launched,
): Launched {
  const binding = posixSpawn as PosixSpawn;
  const parentEnds: number[] = [];
  const childEnds: number[] = [];
  let begin: () => Launched;
  try {
    const program = resolveProgram(file, opts.env, opts.cwd);
    let stdin: number;
    let stdinWrite: number | null = null;
    if (opts.stdinFile !== undefined) {
      stdin = openSync(opts.stdinFile, "r");
      childEnds.push(stdin);
    } else if (opts.stdin || opts.keepStdin) {
      const [read, write] = binding.pipe();
      childEnds.push(read);
      parentEnds.push(write);
      stdin = read;
      stdinWrite = write;
    } else {
      devNull ??= openSync("/dev/null", "r");
      stdin = devNull;
    }
    const [outRead, outWrite] = binding.pipe();
    parentEnds.push(outRead);
    childEnds.push(outWrite);
    // Merged: stderr is the same pipe (as `2>&1`), so the two keep their order.
    let errRead: number | null = null;
    let errWrite = outWrite;
    if (!opts.mergeOutput) {
      [errRead, errWrite] = binding.pipe();
      parentEnds.push(errRead);
      childEnds.push(errWrite);
    }
    const child = new PosixProcess();
    const start = (path: string, argv: readonly string[]) =>
      binding.spawn(
        path,
        argv,
        Object.entries(opts.env).map(([name, value]) => `${name}=${value}`),
        opts.cwd ?? null,
        [stdin, outWrite, errWrite],
        opts.detached ?? false,
        (code, signal) =>
          child.exited(code, signal === null ? null : (SIGNAL_NAMES.get(signal) ?? null)),
      );
    let pid: number;
    try {
      pid = start(program, [file, ...args]);
    } catch (error) {
      const named = namedError(file, error);
      if (named.code !== "ENOEXEC") throw named;
      // A script without `#!`: the shell runs it, as execvp (and so Node) has it.
      pid = start("/bin/sh", ["sh", program, ...args]);
    }
    // The child has its own copies now.
    for (const fd of childEnds.splice(0)) closeSync(fd);
    parentEnds.length = 0;
    // Outside this try: a process that runs is not reported as not started — unless it is
    // killed first, when its streams cannot be made (which does not happen in practice).
    begin = () => {
      try {
        return child.started(
          pid,
          outRead,
          errRead,
          stdinWrite,
          opts.keepStdin ? null : (opts.stdin ?? ""),
        );
      } catch (error) {
        try {
          process.kill(opts.detached ? -pid : pid, "SIGKILL");
        } catch {}
        return notStarted(namedError(file, error));
      }
    };
  } catch (error) {
    for (const fd of [...childEnds, ...parentEnds]) closeSync(fd);
    return notStarted(namedError(file, error));
  }
  return begin();
}

/** A process posix_spawn started, as a ChildProcess shows it. */
class PosixProcess extends EventEmitter implements KeptProcess {
  pid: number | undefined = undefined;
  // Set in started(), before the caller sees this object.
  stdout!: Socket;
  /** An empty stream when stderr goes to stdout's pipe (`mergeOutput`). */
  stderr!: Readable;
  /** Its stdin, when the caller keeps it open (see launchKept). */
  stdin!: Writable;
  private open = 0;
  private status: [number | null, NodeJS.Signals | null] | null = null;
  private closed = false;

  started(
    pid: number,
    out: number,
    err: number | null,
    stdinWrite: number | null,
    /** Written to its stdin, which is then closed; null: the caller keeps it (launchKept). */
    input: string | null,
  ): this {
    this.pid = pid;
    this.stdout = this.output(out);
    this.stderr = err === null ? Readable.from([]) : this.output(err);
    if (stdinWrite !== null) {
      const stdin = new Socket({ fd: stdinWrite, readable: false, writable: true });
      if (input === null) this.stdin = stdin;
      else {
        // The process did not read its stdin (EPIPE): not an error of ours.
        stdin.on("error", () => {});
        stdin.end(input);
      }
    }
    process.nextTick(() => this.emit("spawn"));
    return this;
  }

  exited(code: number | null, signal: NodeJS.Signals | null): void {
    this.status = [code, signal];
    this.emit("exit", code, signal);
    // Output nobody reads is read to its end, so that `close` comes (Node's flushStdio).
    for (const stream of [this.stdout, this.stderr]) {
      if (stream.listenerCount("data") === 0 && stream.listenerCount("readable") === 0) {
        stream.resume();
      }
    }
    this.maybeClose();
  }

  /** A process that could not start (launchKept): `error`, and streams that take and give nothing. */
  notStarted(error: NodeJS.ErrnoException): this {
    this.stdout = new Socket();
    this.stderr = Readable.from([]);
    this.stdin = new Writable({ write: (_chunk, _encoding, done) => done() });
    process.nextTick(() => this.emit("error", error));
    return this;
  }

  setRef(on: boolean): void {
    if (this.pid !== undefined && this.status === null) posixSpawn?.ref(this.pid, on);
    for (const stream of [this.stdin, this.stdout, this.stderr]) {
      if (stream instanceof Socket) {
        if (on) stream.ref();
        else stream.unref();
      }
    }
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
    this.open++;
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
