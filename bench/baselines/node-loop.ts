/**
 * The Ralph loop in a plain Node process: the same two commands per iteration as looprun's
 * (`sh -c AGENT` in its own process group with the prompt on stdin, then `sh -c TEST`), and
 * nothing else — no queue, no snapshot. The floors of any runner written in Node, by MODE:
 * - `spawn`: Node spawns each command (what spawning from a Node process costs);
 * - `helper`: a small forking process (fork-helper.pl) spawns them for Node, over a pipe — a
 *   launcher that forks no Node heap;
 * - `helper-commit`: the same, and one durable SQLite commit per iteration (WAL,
 *   synchronous=FULL, one row) — the least a runner that keeps its history can write.
 * Runs in DIR with AGENT, TEST, ITERATIONS; prints `{"ms": …, "iterations": …}` (the loop
 * alone, without Node's start-up).
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import Database from "better-sqlite3";

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};
const dir = env("DIR");
const mode = process.env.MODE ?? "spawn";
if (!["spawn", "helper", "helper-commit"].includes(mode)) throw new Error(`unknown MODE ${mode}`);
const commandEnv = { PATH: process.env.PATH ?? "/usr/bin:/bin" };

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

/** Runs commands through fork-helper.pl: one request frame out, one reply frame back. */
function forkHelper(): { run(command: string, stdin: string): Promise<number>; close(): void } {
  const helper = spawn("perl", [join(import.meta.dirname, "fork-helper.pl")], {
    stdio: ["pipe", "pipe", "inherit"],
    env: commandEnv,
  });
  const waiting = new Map<number, (code: number) => void>();
  let pending: Buffer = Buffer.alloc(0);
  let next = 0;
  helper.stdout.on("data", (data: Buffer) => {
    pending = pending.length > 0 ? Buffer.concat([pending, data]) : data;
    while (pending.length >= 4 && pending.length >= 4 + pending.readUInt32BE(0)) {
      const length = pending.readUInt32BE(0);
      const [id, code] = pending
        .subarray(4, 4 + length)
        .toString()
        .split("\0");
      pending = pending.subarray(4 + length);
      waiting.get(Number(id))?.(Number(code));
      waiting.delete(Number(id));
    }
  });
  return {
    run(command, stdin) {
      const id = ++next;
      const payload = Buffer.from([id, dir, command, stdin].join("\0"));
      const head = Buffer.alloc(4);
      head.writeUInt32BE(payload.length);
      helper.stdin.write(Buffer.concat([head, payload]));
      return new Promise((resolve) => waiting.set(id, resolve));
    },
    close: () => helper.stdin.end(),
  };
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

const helper = mode === "spawn" ? null : forkHelper();
const run = helper ? helper.run : spawned;
const record = mode === "helper-commit" ? history() : () => {};
const agent = env("AGENT");
const test = env("TEST");
const max = Number(env("ITERATIONS"));
const prompt = "bench\n";
// The helper's own start, as Node's, is not the loop's time.
if (helper) await run("true", "");
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
helper?.close();
process.stdout.write(`${JSON.stringify({ ms, iterations: i })}\n`);
