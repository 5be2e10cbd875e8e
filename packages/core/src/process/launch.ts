import { type ChildProcess, fork, spawn } from "node:child_process";
import { EventEmitter } from "node:events";
import { closeSync, openSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  type KeptProcess,
  posixLaunch,
  posixLaunchKept,
  posixSpawnAvailable,
} from "./posix-launch";

/**
 * Spawning a process from a worker with Node's spawn blocks its event loop for the fork and
 * exec: the kernel copies the page tables of the whole process, and a worker with its libraries
 * loaded has several times those of a bare Node process — measured 2.6 ms per spawn in the
 * worker against 1.1–1.3 ms in a bare `node` (bench/RESULTS.md). With quick commands that was a
 * third of an iteration. So commands and git are spawned one of two other ways; what a caller
 * gets (`Launched`) behaves like the ChildProcess it replaces:
 *
 * - through posix_spawn (posix-launch.ts), in every process where the @looprun/spawn addon is
 *   built (Linux): the child runs on the caller's memory until it execs, so nothing is copied,
 *   and nothing relays the command;
 * - else, in a worker (`useLauncher()`), through a launcher: one small Node process
 *   (launcher-main.mjs) started on first use,
 *   which spawns each command and relays its output and exit over its IPC channel. When the
 *   launcher dies, every command it started is killed and reported as ended by SIGKILL (or,
 *   when it had not started, failed to start), and the next spawn starts a new launcher. When
 *   the worker dies, its launcher exits with it.
 *
 * Either way the commands run in their own process groups; the worker kills them by group.
 */

export interface LaunchOptions {
  cwd?: string;
  env: Record<string, string>;
  /** Its own process group (see run-command.ts). */
  detached?: boolean;
  /** Written to the process's stdin, which is then closed. */
  stdin?: string;
  /**
   * The process's stdin is this file, opened read-only (then `stdin` is not used): what it
   * reads never crosses the launcher's channel or a pipe. When it cannot be opened, the
   * process does not start (an `error`, as for a missing program).
   */
  stdinFile?: string;
  /**
   * The process's stderr is its stdout (one pipe, as `2>&1`), so what it writes to either comes
   * in the order it was written; `stderr` then gives nothing. Through posix_spawn only: Node's
   * spawn and the launcher read the two from pipes of their own.
   */
  mergeOutput?: boolean;
}

/** The part of a ChildProcess that the command runners use. */
export interface Launched {
  /** Known once the process runs (after the `spawn` event). */
  readonly pid: number | undefined;
  readonly stdout: OutputStream;
  readonly stderr: OutputStream;
  on(event: "spawn", listener: () => void): this;
  on(event: "error", listener: (error: Error) => void): this;
  on(
    event: "exit" | "close",
    listener: (code: number | null, signal: NodeJS.Signals | null) => void,
  ): this;
  once(
    event: "close",
    listener: (code: number | null, signal: NodeJS.Signals | null) => void,
  ): this;
  kill(signal?: NodeJS.Signals): boolean;
}

interface OutputStream {
  on(event: "data", listener: (chunk: Buffer) => void): unknown;
  destroy(): unknown;
}

let launcher: Launcher | null = null;
/** How this process spawns: posix_spawn wherever the addon is built, else Node's spawn. */
let way: "posix_spawn" | "launcher" | "node" = posixSpawnAvailable ? "posix_spawn" : "node";

/**
 * From now on, this process's commands and git runs are spawned without copying it: through
 * posix_spawn where the addon is built, else by a launcher process (a worker, whose heap is
 * big). `posixSpawn: false` asks for the launcher whatever is built; `useLauncher(false)` for
 * Node's own spawn (tests of each way).
 */
export function useLauncher(on = true, { posixSpawn = true }: { posixSpawn?: boolean } = {}): void {
  way = !on ? "node" : posixSpawn && posixSpawnAvailable ? "posix_spawn" : "launcher";
  if (way !== "launcher") {
    launcher?.close();
    launcher = null;
  }
}

/** The launcher's pid, when one runs (for tests and diagnostics). */
export function launcherPid(): number | undefined {
  return launcher !== null && !launcher.dead ? launcher.pid : undefined;
}

/**
 * Starts `file args` with its stdin a pipe the caller keeps writing to (a process kept for
 * requests, see diff-tree-process.ts) when this process spawns through posix_spawn; null
 * otherwise (see `useLauncher`), and the caller spawns it with Node's spawn — once per kept
 * process, not once per command.
 */
export function launchKept(
  file: string,
  args: readonly string[],
  opts: Pick<LaunchOptions, "cwd" | "env">,
): KeptProcess | null {
  return way === "posix_spawn" ? posixLaunchKept(file, args, opts) : null;
}

/** Spawns `file args` the way this process spawns (see `useLauncher`). */
export function launch(file: string, args: readonly string[], opts: LaunchOptions): Launched {
  if (way === "posix_spawn") return posixLaunch(file, args, opts, notStarted);
  if (way === "node") return spawnHere(file, args, opts);
  if (launcher === null || launcher.dead) launcher = new Launcher();
  return launcher.spawn(file, args, opts);
}

function spawnHere(file: string, args: readonly string[], opts: LaunchOptions): Launched {
  let input: number | "pipe" = "pipe";
  try {
    if (opts.stdinFile !== undefined) input = openSync(opts.stdinFile, "r");
  } catch (error) {
    return notStarted(error as NodeJS.ErrnoException);
  }
  let child: ChildProcess;
  try {
    child = spawn(file, [...args], {
      ...(opts.cwd !== undefined ? { cwd: opts.cwd } : {}),
      env: opts.env,
      detached: opts.detached ?? false,
      stdio: [input, "pipe", "pipe"],
    });
  } finally {
    // The child has its own copy once spawn() returns.
    if (typeof input === "number") closeSync(input);
  }
  child.stdin?.on("error", () => {
    // The process did not read its stdin (EPIPE): not an error of ours.
  });
  child.stdin?.end(opts.stdin ?? "");
  return child as unknown as Launched;
}

/** A process that could not start, told as the launcher tells it: an `error` and nothing else. */
function notStarted(error: NodeJS.ErrnoException): Launched {
  const remote = new RemoteProcess(
    () => {},
    () => {},
  );
  process.nextTick(() =>
    remote.deliver({
      id: 0,
      ev: "error",
      message: error.message,
      ...(error.code !== undefined ? { code: error.code } : {}),
    }),
  );
  return remote;
}

type Event =
  | { id: number; ev: "spawn"; pid: number }
  | { id: number; ev: "error"; message: string; code?: string }
  | { id: number; ev: "stdout" | "stderr"; data: Uint8Array }
  | { id: number; ev: "exit" | "close"; code: number | null; signal: NodeJS.Signals | null };

class Launcher {
  private readonly child: ChildProcess;
  private readonly running = new Map<number, RemoteProcess>();
  private next = 0;
  dead = false;

  get pid(): number | undefined {
    return this.child.pid;
  }

  constructor() {
    const main = fileURLToPath(new URL("./launcher-main.mjs", import.meta.url));
    // Nothing of the worker's environment (secrets included): each command gets its own.
    this.child = fork(main, [], {
      serialization: "advanced",
      stdio: ["ignore", "ignore", "inherit", "ipc"],
      // Its garbage is all short-lived messages: V8's default young generation (growing to
      // 3 × 16 MB) held ~45 MB after a thousand runs; 1 MB semi-spaces hold ~15 MB.
      execArgv: ["--max-semi-space-size=1"],
      env: {},
    });
    this.child.on("message", (m: Event) => this.running.get(m.id)?.deliver(m));
    this.child.on("exit", () => this.died());
    this.child.on("error", () => this.died());
    this.idle();
  }

  spawn(file: string, args: readonly string[], opts: LaunchOptions): Launched {
    const id = ++this.next;
    const remote = new RemoteProcess(
      () => {
        this.running.delete(id);
        if (this.running.size === 0) this.idle();
      },
      () => this.send({ op: "destroy", id }),
    );
    this.running.set(id, remote);
    // While commands run, the channel keeps this process alive; idle, it does not.
    this.child.channel?.ref();
    this.child.ref();
    this.send({
      op: "spawn",
      id,
      file,
      args,
      options: {
        ...(opts.cwd !== undefined ? { cwd: opts.cwd } : {}),
        env: opts.env,
        detached: opts.detached ?? false,
      },
      stdin: opts.stdin ?? "",
      ...(opts.stdinFile !== undefined ? { stdinFile: opts.stdinFile } : {}),
    });
    return remote;
  }

  close(): void {
    this.dead = true;
    if (this.child.connected) this.child.disconnect();
  }

  private send(message: object): void {
    if (this.child.connected) this.child.send(message);
  }

  private idle(): void {
    this.child.channel?.unref();
    this.child.unref();
  }

  private died(): void {
    this.dead = true;
    for (const remote of [...this.running.values()]) remote.lost();
    this.running.clear();
  }
}

class Stream extends EventEmitter implements OutputStream {
  constructor(private readonly onDestroy: () => void) {
    super();
  }
  destroy(): void {
    this.onDestroy();
  }
}

/** A process the launcher spawned, as the caller sees it. */
class RemoteProcess extends EventEmitter implements Launched {
  pid: number | undefined = undefined;
  readonly stdout: Stream;
  /** A signal asked for before the process ran: sent as soon as it does. */
  private pendingSignal: NodeJS.Signals | null = null;
  readonly stderr: Stream;
  private ended = false;

  constructor(
    private readonly onEnd: () => void,
    destroy: () => void,
  ) {
    super();
    this.stdout = new Stream(destroy);
    this.stderr = new Stream(destroy);
  }

  deliver(m: Event): void {
    switch (m.ev) {
      case "spawn":
        this.pid = m.pid;
        this.emit("spawn");
        if (this.pendingSignal) this.kill(this.pendingSignal);
        return;
      case "error": {
        const error = Object.assign(new Error(m.message), m.code ? { code: m.code } : {});
        // As a ChildProcess that could not start: `error`, and no `close` (nothing to wait for).
        if (this.pid === undefined) this.end();
        this.emit("error", error);
        return;
      }
      case "stdout":
      case "stderr":
        (m.ev === "stdout" ? this.stdout : this.stderr).emit("data", Buffer.from(m.data));
        return;
      case "exit":
        this.emit("exit", m.code, m.signal);
        return;
      case "close":
        this.end();
        this.emit("close", m.code, m.signal);
        return;
    }
  }

  kill(signal: NodeJS.Signals = "SIGTERM"): boolean {
    if (this.ended) return false;
    if (this.pid === undefined) {
      this.pendingSignal = signal;
      return true;
    }
    try {
      process.kill(this.pid, signal);
      return true;
    } catch {
      return false;
    }
  }

  /** The launcher died: the process's group is killed and it ends as killed. */
  lost(): void {
    if (this.ended) return;
    if (this.pid === undefined) {
      this.end();
      this.emit("error", new Error("the process launcher exited"));
      return;
    }
    for (const target of [-this.pid, this.pid]) {
      try {
        process.kill(target, "SIGKILL");
      } catch {
        // Gone already, or not a group leader.
      }
    }
    this.emit("exit", null, "SIGKILL");
    this.end();
    this.emit("close", null, "SIGKILL");
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.onEnd();
  }
}
