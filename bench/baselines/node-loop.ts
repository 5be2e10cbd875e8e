/**
 * The Ralph loop in a plain Node process: the same two commands per iteration as looprun's
 * (`sh -c AGENT` in its own process group with the prompt on stdin, then `sh -c TEST`), and
 * nothing else — no queue, no snapshot. The floors of any runner written in Node, by MODE:
 * - `spawn`: Node's child_process spawns each command (it forks the Node process);
 * - `posix`: posix_spawn spawns them (the @looprun/spawn addon looprun's workers use, called
 *   here directly): the least spawning from Node costs;
 * - `posix-commit`: the same, and one durable SQLite commit per iteration (WAL,
 *   synchronous=FULL, one row) — the least a runner that keeps its history can write.
 * Runs in DIR with AGENT, TEST, ITERATIONS and the commands' environment (COMMAND_ENV, JSON);
 * prints `{"ms": …, "iterations": …}` (the loop alone, without Node's start-up).
 */
import { spawn } from "node:child_process";
import { closeSync } from "node:fs";
import { Socket } from "node:net";
import { join } from "node:path";
import { posixSpawn } from "@looprun/spawn";
import Database from "better-sqlite3";

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};
const dir = env("DIR");
const mode = process.env.MODE ?? "spawn";
if (!["spawn", "posix", "posix-commit"].includes(mode)) throw new Error(`unknown MODE ${mode}`);
// The environment looprun's worker gives its commands (COMMAND_ENV, JSON, from the bench).
const commandEnv = JSON.parse(env("COMMAND_ENV")) as Record<string, string>;
const envp = Object.entries(commandEnv).map(([name, value]) => `${name}=${value}`);

function spawned(command: string, stdin: string): Promise<number | null> {
  return new Promise((resolve) => {
    const child = spawn("/bin/sh", ["-c", command], {
      cwd: dir,
      detached: true,
      stdio: ["pipe", "pipe", "pipe"],
      env: commandEnv,
    });
    child.stdin.on("error", () => {});
    child.stdin.end(stdin);
    child.stdout.resume();
    child.stderr.resume();
    child.on("close", (code) => resolve(code));
  });
}

/**
 * The same through posix_spawn, as looprun's workers spawn: stdin's pipe, one pipe for stdout
 * and stderr (as `2>&1`), and the exit from a pidfd (see packages/spawn).
 */
function posixSpawned(command: string, stdin: string): Promise<number | null> {
  if (posixSpawn === null) throw new Error("the @looprun/spawn addon is not built");
  const binding = posixSpawn;
  return new Promise((resolve) => {
    const [inRead, inWrite] = binding.pipe();
    const [outRead, outWrite] = binding.pipe();
    let left = 2;
    let code: number | null = null;
    const done = () => {
      if (--left === 0) resolve(code);
    };
    binding.spawn(
      "/bin/sh",
      ["sh", "-c", command],
      envp,
      dir,
      [inRead, outWrite, outWrite],
      true,
      (exitCode) => {
        code = exitCode;
        done();
      },
    );
    for (const fd of [inRead, outWrite]) closeSync(fd);
    const input = new Socket({ fd: inWrite, readable: false, writable: true });
    input.on("error", () => {});
    input.end(stdin);
    const output = new Socket({ fd: outRead, readable: true, writable: false });
    output.resume();
    output.on("close", done);
  });
}

/** One durable commit per iteration, in a database in the workspace. */
function history(): (n: number, code: number | null) => void {
  const db = new Database(join(dir, ".history.db"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec("CREATE TABLE iterations (n INTEGER PRIMARY KEY, exit_code INTEGER, at INTEGER)");
  const insert = db.prepare("INSERT INTO iterations VALUES (?, ?, ?)");
  return (n, code) => insert.run(n, code, Date.now());
}

const run = mode === "spawn" ? spawned : posixSpawned;
const record = mode === "posix-commit" ? history() : () => {};
const agent = env("AGENT");
const test = env("TEST");
const max = Number(env("ITERATIONS"));
const prompt = "bench\n";
const t0 = performance.now();
let i = 0;
while (i < max) {
  i++;
  await run(agent, prompt);
  const code = await run(test, "");
  record(i, code);
  if (code === 0) break;
}
const ms = performance.now() - t0;
process.stdout.write(`${JSON.stringify({ ms, iterations: i })}\n`);
