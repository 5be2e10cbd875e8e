// The process launcher (see launch.ts): a small Node process that spawns commands for a worker
// and relays what they do over its IPC channel. Plain JavaScript with no imports but Node's:
// it runs as is, under `node`, whether the worker runs from sources or from its bundle.
import { spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";

const children = new Map();
const send = (message) => {
  if (process.connected) process.send(message);
};

process.on("message", (m) => {
  if (m.op === "destroy") {
    const child = children.get(m.id);
    child?.stdout?.destroy();
    child?.stderr?.destroy();
    return;
  }
  if (m.op !== "spawn") return;
  let child;
  let input = "pipe";
  try {
    if (m.stdinFile !== undefined) input = openSync(m.stdinFile, "r");
    child = spawn(m.file, m.args, { ...m.options, stdio: [input, "pipe", "pipe"] });
  } catch (error) {
    send({ id: m.id, ev: "error", message: error.message, code: error.code });
    return;
  } finally {
    // The child has its own copy once spawn() returns.
    if (typeof input === "number") closeSync(input);
  }
  children.set(m.id, child);
  child.on("spawn", () => send({ id: m.id, ev: "spawn", pid: child.pid }));
  child.on("error", (error) =>
    send({ id: m.id, ev: "error", message: error.message, code: error.code }),
  );
  child.stdin?.on("error", () => {
    // The command did not read its stdin (EPIPE): not an error of ours.
  });
  child.stdin?.end(m.stdin ?? "");
  child.stdout.on("data", (data) => send({ id: m.id, ev: "stdout", data }));
  child.stderr.on("data", (data) => send({ id: m.id, ev: "stderr", data }));
  child.on("exit", (code, signal) => send({ id: m.id, ev: "exit", code, signal }));
  child.on("close", (code, signal) => {
    children.delete(m.id);
    send({ id: m.id, ev: "close", code, signal });
  });
});

// The worker is gone (exited, or killed -9): so is its launcher. What it started runs in its
// own process group, recorded by the worker, for whoever resumes the run to kill.
process.on("disconnect", () => process.exit(0));
