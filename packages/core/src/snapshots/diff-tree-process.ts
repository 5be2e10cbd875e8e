import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import type { Socket } from "node:net";
import { launchKept } from "../process/launch";

/**
 * `git diff-tree --stdin` kept running for a snapshot git dir, so that an iteration's diffs
 * cost a line written to a pipe instead of a git process. With quick commands a git process
 * per iteration was a third of the processes an iteration started, and on a small machine the
 * CPU it took slowed the agent's command beside which it ran (bench/RESULTS.md).
 *
 * diff-tree reads tree pairs from its stdin and prints each pair's line, then its diff. A line
 * that is not an object id it prints as it is and flushes its output (what gitk relies on), so
 * each request ends with a marker line of its own: the request's output is complete when the
 * output ends with that marker. One request at a time; whatever goes wrong (git says anything
 * on stderr, exits, times out, or the caller aborts) kills the process and answers `null`, and
 * the caller runs git the usual way. An idle process ends after `idleMs`; it never keeps its
 * own process alive, and it ends with it (its stdin closes). It is spawned through posix_spawn
 * when this process spawns that way (launchKept: Node's spawn blocked a worker's event loop
 * 9–14 ms for each new session's first diffs, bench/RESULTS.md), else by Node's spawn — not
 * through the launcher (launch.ts), whose processes take their stdin at once.
 */

/** What this file uses of a spawned git: a ChildProcess or a process posix_spawn started. */
interface GitProcess {
  stdin: {
    write(text: string): unknown;
    end(): unknown;
    on(event: "error", f: () => void): unknown;
  };
  stdout: { on(event: "data", f: (chunk: Buffer) => void): unknown };
  stderr: { on(event: "data", f: (chunk: Buffer) => void): unknown };
  on(event: "error" | "close", f: () => void): unknown;
  kill(signal: NodeJS.Signals): boolean;
  setRef(on: boolean): void;
}

function spawnGit(args: readonly string[], env: Record<string, string>): GitProcess {
  const kept = launchKept("git", args, { env });
  if (kept !== null) return kept;
  const child = spawn("git", [...args], { env, stdio: ["pipe", "pipe", "pipe"] });
  return Object.assign(child, {
    setRef(on: boolean) {
      // The pipes of a spawned process are sockets (its stdio types say streams).
      const { stdin, stdout, stderr } = child as unknown as Record<string, Socket>;
      for (const handle of [child, stdin, stdout, stderr]) {
        if (on) handle?.ref();
        else handle?.unref();
      }
    },
  });
}

export interface DiffTreeOutput {
  /** The head of the output, up to the cap. */
  stdoutRaw: Buffer;
  /** Bytes of output, kept or not. */
  stdoutBytes: number;
  truncated: boolean;
}

interface Pending {
  marker: Buffer;
  cap: number;
  chunks: Buffer[];
  keptBytes: number;
  bytes: number;
  /** The last bytes received, as long as the marker. */
  tail: Buffer;
  /** Set once the marker came: the answer, given a moment later (see receive). */
  answered: boolean;
  done(output: DiffTreeOutput | null): void;
}

export interface DiffTreeProcessOptions {
  /** git's arguments, `diff-tree --stdin …` included. */
  args: readonly string[];
  env: Record<string, string>;
  timeoutMs: number;
  idleMs: number;
}

export class DiffTreeProcess {
  private readonly child: GitProcess;
  private readonly nonce = randomBytes(12).toString("hex");
  private seq = 0;
  private pending: Pending | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private idleTimer: NodeJS.Timeout | null = null;
  dead = false;

  constructor(private readonly opts: DiffTreeProcessOptions) {
    this.child = spawnGit(opts.args, opts.env);
    this.child.on("error", () => this.kill());
    this.child.on("close", () => this.kill());
    this.child.stdin.on("error", () => this.kill());
    this.child.stdout.on("data", (chunk: Buffer) => this.receive(chunk));
    // git says something only when a pair fails: the caller asks git again the usual way.
    this.child.stderr.on("data", () => this.kill());
    this.idle();
  }

  /** The output for `pairs` (lines of `TREE TREE`), or null when this process could not tell. */
  run(pairs: string, maxStdoutBytes: number, signal?: AbortSignal): Promise<DiffTreeOutput | null> {
    const next = this.queue.then(() => this.request(pairs, maxStdoutBytes, signal));
    this.queue = next;
    return next;
  }

  /** Ends the process (its requests answer null). */
  kill(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    if (!this.dead) {
      this.dead = true;
      this.child.kill("SIGKILL");
    }
    const pending = this.pending;
    this.pending = null;
    pending?.done(null);
  }

  private request(
    pairs: string,
    cap: number,
    signal?: AbortSignal,
  ): Promise<DiffTreeOutput | null> {
    if (this.dead || signal?.aborted) return Promise.resolve(null);
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    this.setRef(true);
    const marker = Buffer.from(`looprun-sync ${this.nonce} ${++this.seq}\n`);
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.kill(), this.opts.timeoutMs);
      const onAbort = () => this.kill();
      signal?.addEventListener("abort", onAbort, { once: true });
      this.pending = {
        marker,
        cap,
        chunks: [],
        keptBytes: 0,
        bytes: 0,
        tail: Buffer.alloc(0),
        answered: false,
        done: (output) => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          if (!this.dead) this.idle();
          resolve(output);
        },
      };
      this.child.stdin.write(`${pairs.endsWith("\n") ? pairs : `${pairs}\n`}${marker}`);
    });
  }

  private receive(chunk: Buffer): void {
    const p = this.pending;
    if (p === null || p.answered) {
      this.kill();
      return;
    }
    p.bytes += chunk.length;
    // Kept: the head of the output and room for the marker (cut off at the end).
    const room = p.cap + p.marker.length - p.keptBytes;
    if (room > 0) {
      const part = chunk.subarray(0, room);
      p.chunks.push(part);
      p.keptBytes += part.length;
    }
    // The last bytes seen, as many as the marker has: from this chunk alone when it is long enough.
    const size = p.marker.length;
    p.tail =
      chunk.length >= size
        ? chunk.subarray(chunk.length - size)
        : Buffer.concat([p.tail, chunk]).subarray(-size);
    if (!p.tail.equals(p.marker)) return;
    const bytes = p.bytes - p.marker.length;
    const kept = Buffer.concat(p.chunks).subarray(0, Math.min(p.cap, bytes));
    // git writes a complaint on stderr before the marker on stdout, but both pipes may be read
    // in the same turn of the event loop, stdout first: the answer waits for the end of that
    // turn, so that a complaint read in it still kills the process and answers null.
    p.answered = true;
    setImmediate(() => {
      if (this.pending !== p) return;
      this.pending = null;
      p.done({ stdoutRaw: kept, stdoutBytes: bytes, truncated: bytes > kept.length });
    });
  }

  private idle(): void {
    this.setRef(false);
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null;
      if (this.pending === null && !this.dead) {
        this.dead = true;
        this.child.stdin.end();
      }
    }, this.opts.idleMs);
    this.idleTimer.unref();
  }

  /** Busy, the process and its pipes keep this process alive; idle, they do not. */
  private setRef(on: boolean): void {
    this.child.setRef(on);
  }
}

/** One diff-tree process per key (a git dir and its arguments), at most `max` of them. */
export class DiffTreeProcesses {
  private readonly processes = new Map<string, DiffTreeProcess>();

  constructor(private readonly max = 8) {}

  get(key: string, opts: DiffTreeProcessOptions): DiffTreeProcess {
    let proc = this.processes.get(key);
    if (proc?.dead) proc = undefined;
    if (proc === undefined) {
      proc = new DiffTreeProcess(opts);
      for (const [other, old] of this.processes) {
        if (this.processes.size < this.max && !old.dead) break;
        this.processes.delete(other);
        old.kill();
      }
    }
    // The most recently used last: the first is the one to end when there are too many.
    this.processes.delete(key);
    this.processes.set(key, proc);
    return proc;
  }

  closeAll(): void {
    for (const proc of this.processes.values()) proc.kill();
    this.processes.clear();
  }
}
