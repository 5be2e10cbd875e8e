/**
 * The Ralph loop in a plain Node process: the same two commands per iteration as looprun's
 * (`sh -c AGENT` in its own process group with the prompt on stdin, then `sh -c TEST`), and
 * nothing else — no database, no snapshot, no queue. The floor of any runner written in
 * Node: what spawning from a Node process costs. Runs in DIR with AGENT, TEST, ITERATIONS;
 * prints `{"ms": …, "iterations": …}` (the loop alone, without Node's start-up).
 */
import { spawn } from "node:child_process";

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};

function run(command: string, stdin: string): Promise<number | null> {
  return new Promise((resolve) => {
    const child = spawn("/bin/sh", ["-c", command], {
      cwd: env("DIR"),
      detached: true,
      stdio: ["pipe", "pipe", "pipe"],
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    });
    child.stdin.on("error", () => {});
    child.stdin.end(stdin);
    child.stdout.resume();
    child.stderr.resume();
    child.on("close", (code) => resolve(code));
  });
}

const agent = env("AGENT");
const test = env("TEST");
const max = Number(env("ITERATIONS"));
const prompt = "bench\n";
const t0 = performance.now();
let i = 0;
while (i < max) {
  i++;
  await run(agent, prompt);
  if ((await run(test, "")) === 0) break;
}
process.stdout.write(`${JSON.stringify({ ms: performance.now() - t0, iterations: i })}\n`);
