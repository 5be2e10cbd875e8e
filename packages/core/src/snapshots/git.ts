import { launch } from "../process/launch";
import { spawnErrorMessage } from "../process/spawn-error";

export interface GitOptions {
  /** The environment git runs with (see `gitEnv`): nothing of looprun's own. */
  env: Record<string, string>;
  /** @defaultValue the process's working directory */
  cwd?: string;
  timeoutMs: number;
  /** @defaultValue 16 MiB — stdout kept (the head); the rest is counted, not kept */
  maxStdoutBytes?: number;
  signal?: AbortSignal;
  /** Written to git's stdin (else it is empty). */
  stdin?: string;
}

export interface GitResult {
  /** `null` when git was killed (timeout, abort) or could not start. */
  exitCode: number | null;
  stdout: string;
  /** The kept stdout as bytes (offsets into git's output, e.g. of NUL separators). */
  stdoutRaw: Buffer;
  /** Bytes git wrote to stdout, kept or not. */
  stdoutBytes: number;
  truncated: boolean;
  /** The tail of stderr, for error messages. */
  stderr: string;
  timedOut: boolean;
  aborted: boolean;
}

/** A git command that failed: its arguments and what it said. */
export class GitError extends Error {
  override readonly name = "GitError";
  constructor(
    readonly args: readonly string[],
    readonly result: GitResult,
  ) {
    const why = result.timedOut
      ? "timed out"
      : result.aborted
        ? "was aborted"
        : `exited ${result.exitCode ?? "without a code"}`;
    super(`git ${args.slice(0, 3).join(" ")} ${why}: ${result.stderr.trim().slice(-500)}`);
  }
}

const STDERR_CAP = 8192;

/**
 * The environment of every git call: PATH, a neutral HOME and locale, no system or global
 * configuration (a user's hooks, signing or excludes never apply), and a fixed identity.
 */
export function gitEnv(path: string | undefined, home: string): Record<string, string> {
  return {
    PATH: path ?? "/usr/local/bin:/usr/bin:/bin",
    HOME: home,
    XDG_CONFIG_HOME: home,
    LANG: "C",
    LC_ALL: "C",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_TERMINAL_PROMPT: "0",
    GIT_AUTHOR_NAME: "looprun",
    GIT_AUTHOR_EMAIL: "looprun@localhost",
    GIT_COMMITTER_NAME: "looprun",
    GIT_COMMITTER_EMAIL: "looprun@localhost",
  };
}

/** Runs `git ARGS` (no shell) with a timeout; resolves with what it printed, whatever its exit. */
export function runGit(args: readonly string[], opts: GitOptions): Promise<GitResult> {
  const cap = opts.maxStdoutBytes ?? 16 * 1024 * 1024;
  return new Promise((resolve) => {
    // git exiting without reading all of its stdin is not an error: its exit status tells.
    const child = launch("git", args, {
      env: opts.env,
      ...(opts.cwd !== undefined ? { cwd: opts.cwd } : {}),
      stdin: opts.stdin ?? "",
    });
    const kept: Buffer[] = [];
    let keptBytes = 0;
    let stdoutBytes = 0;
    let stderr = "";
    let timedOut = false;
    let aborted = false;
    let settled = false;

    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, opts.timeoutMs);
    const onAbort = () => {
      aborted = true;
      child.kill("SIGKILL");
    };
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener("abort", onAbort, { once: true });

    child.stdout.on("data", (chunk: Buffer) => {
      stdoutBytes += chunk.length;
      if (keptBytes < cap) {
        const part = chunk.subarray(0, cap - keptBytes);
        kept.push(part);
        keptBytes += part.length;
      }
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString("utf8")).slice(-STDERR_CAP);
    });

    const finish = (exitCode: number | null, spawnError?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
      const raw = Buffer.concat(kept);
      resolve({
        exitCode,
        stdout: raw.toString("utf8"),
        stdoutRaw: raw,
        stdoutBytes,
        truncated: stdoutBytes > keptBytes,
        stderr: spawnError
          ? `${stderr}\ncould not run git: ${spawnErrorMessage(spawnError, opts.cwd)}`
          : stderr,
        timedOut,
        aborted,
      });
    };
    child.on("error", (error) => finish(null, error));
    child.on("close", (code) => finish(timedOut || aborted ? null : code));
  });
}
