import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createServer, request as httpRequest, type Server } from "node:http";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, inject, it } from "vitest";
import { freePort } from "./support/redis-server";
import {
  cliEnvFor,
  commandRun,
  getRun,
  LOOPRUN_BIN,
  type ManagedProcess,
  runCli,
  StopWaiting,
  shq,
  spawnManaged,
  submit,
  tempDir,
  useStack,
  waitFor,
  waitForHealthy,
  waitForStatus,
} from "./support/stack";

// `looprun watch` as a person sees it: through an API that goes away and comes back, one that
// shuts down, a reader that stops reading, a terminal and its Ctrl-C.

const stack = useStack(() => ({ redisUrl: inject("redisUrl") }));
const cliEnv = () => cliEnvFor(stack.url);
/** The stack's API, started again by a test that stops it; the next tests talk to it. */
let restartedApi: ManagedProcess | undefined;
const cleanups: (() => Promise<unknown> | unknown)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

afterAll(async () => {
  await restartedApi?.stop();
});

/**
 * Submits a run that goes on for a while (each iteration changes the workspace: no `stalled`),
 * stopped after the test so that it leaves the workers to the next one.
 */
async function submitLongRun(rest: Record<string, unknown> = {}): Promise<string> {
  const { id } = await submit(
    stack,
    commandRun("echo x >> lines; sleep 0.3", { testCommand: "false", maxIterations: 200, ...rest }),
  );
  cleanups.push(() => stack.api("POST", `/api/runs/${id}/stop`));
  return id;
}

/** `looprun watch ID`, its output piped to this test. */
function startWatch(id: string, env = cliEnv()): ManagedProcess {
  const watch = spawnManaged("looprun watch", process.execPath, [LOOPRUN_BIN, "watch", id], {
    env,
  });
  cleanups.push(() => watch.stop("SIGKILL"));
  return watch;
}

const outputHas = (proc: ManagedProcess, text: string) => () => {
  if (proc.hasExited()) throw new StopWaiting(`${proc.name} exited:\n${proc.output()}`);
  return proc.output().includes(text);
};

const linesWith = (output: string, text: string) =>
  output.split(/\r?\n/).filter((line) => line.includes(text));

describe("looprun watch", () => {
  it("names the phase of phase events", async () => {
    const { id } = await submit(
      stack,
      commandRun('[ -n "$LOOPRUN_PHASE" ] && echo "1. touch done"; touch done', {
        testCommand: "test -f done",
        phases: ["planning"],
      }),
    );
    const watch = await runCli(["watch", id], cliEnv());
    expect(watch.code, watch.output).toBe(0);
    expect(watch.stdout).toContain("planning phase started");
    expect(watch.stdout).toContain("planning phase completed");
  });

  it("says once that the API is unreachable while it is down, and goes on when it is back", async () => {
    // The run ends only once the test lets it (after the API is back): however late the stop
    // comes on a loaded machine, the run cannot finish before the outage. (With 12 iterations
    // of ~0.35 s it did once, in a full suite: the watch followed the whole run and exited.)
    const gate = join(tempDir(), "go");
    const id = await submitLongRun({ testCommand: `test -f ${shq(gate)}` });
    const watch = startWatch(id);
    await waitFor(outputHas(watch, "iteration 1 started"), { message: "the watch following" });

    const stopped = stack.apiProcess;
    await stopped.stop();
    await waitFor(
      () => {
        // The stopped API's log (a connection its shutdown had to cut) beside the watch's output.
        if (watch.hasExited())
          throw new StopWaiting(
            `${watch.name} exited:\n${watch.output()}\n--- the API:\n${stopped.output().slice(-6000)}`,
          );
        return watch.output().includes("API unreachable (ECONNREFUSED), retrying…");
      },
      { message: "the watch telling the outage" },
    );
    // The same API again, on the same port; the worker went on meanwhile.
    restartedApi = spawnManaged("api (again)", process.execPath, [LOOPRUN_BIN, "api"], {
      env: stack.env,
    });
    await waitForHealthy(stack.url, restartedApi);
    writeFileSync(gate, "");

    const exit = await watch.exited;
    const output = watch.output();
    expect(exit.code, output).toBe(0);
    expect(output).toContain("finished: succeeded (success)");
    // Once for the outage, not once per attempt (it took several: the API took seconds to start).
    // (A connection cut by the stopping API, at the end of its grace, is a reason of its own:
    // told once too.)
    const notices = linesWith(output, "retrying…");
    expect(
      notices.filter((line) => !line.startsWith("connection to the API lost")),
      output,
    ).toEqual(["API unreachable (ECONNREFUSED), retrying…"]);
    expect(notices.length, output).toBeLessThanOrEqual(2);
    expect(output).not.toContain("reconnecting");
  });

  it("does not hammer an API that ends every stream at once (shutting down): it waits its retry, and more", async () => {
    const id = await submitLongRun();
    await waitForStatus(stack, id, ["running"]);
    // What the API answers while it shuts down: `retry: 2000`, then the end of the stream. Run
    // reads go through to the real API.
    const streams: number[] = [];
    const shuttingDown: Server = createServer((req, res) => {
      if (req.url?.endsWith("/events/stream")) {
        streams.push(Date.now());
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.end("retry: 2000\n\n");
        return;
      }
      fetch(new URL(req.url ?? "/", stack.url)).then(
        async (answer) => {
          res.writeHead(answer.status, { "content-type": "application/json" });
          res.end(await answer.text());
        },
        (error: unknown) => res.destroy(error as Error),
      );
    });
    const port = await freePort();
    await new Promise<void>((listening) => shuttingDown.listen(port, "127.0.0.1", listening));
    cleanups.push(() => new Promise((closed) => shuttingDown.close(closed)));

    const watch = startWatch(id, { ...cliEnv(), LOOPRUN_URL: `http://127.0.0.1:${port}` });
    await waitFor(() => streams.length >= 4 || (watch.hasExited() && "exited"), {
      timeoutMs: 40_000,
      message: "four attempts",
    });
    expect(watch.hasExited(), watch.output()).toBe(false);
    const gaps = streams.slice(1).map((at, i) => at - (streams[i] as number));
    // Before, 250 ms each: four attempts a second for as long as the API took to go.
    for (const gap of gaps) expect(gap, `gaps ${gaps.join(", ")} ms`).toBeGreaterThanOrEqual(1900);
    expect(linesWith(watch.output(), "retrying…"), watch.output()).toEqual([
      "the API ended the event stream (shutting down?), retrying…",
    ]);
  });

  it("waits for an API that is away, failing or limiting as the run finishes, and reads the outcome once it is back", async () => {
    const { id } = await submit(stack, commandRun("touch done", { testCommand: "test -f done" }));
    // A proxy to the real API that fails the watch's reads of the run after its event stream
    // opened (the read of the outcome after `run_finished`): a cut connection, a 503, then a
    // rate limit's 429.
    let streamOpened = false;
    const failures = ["cut", "503", "429"];
    const proxy: Server = createServer((req, res) => {
      const path = req.url ?? "/";
      if (path.includes("/events/stream")) streamOpened = true;
      else if (streamOpened && path === `/api/runs/${id}`) {
        const failure = failures.shift();
        if (failure === "cut") return void req.socket.destroy();
        if (failure === "503") {
          res.writeHead(503, { "content-type": "application/json" });
          return void res.end(
            JSON.stringify({ error: { code: "unavailable", message: "restarting" } }),
          );
        }
        if (failure === "429") {
          res.writeHead(429, { "content-type": "application/json", "retry-after": "1" });
          return void res.end(
            JSON.stringify({ error: { code: "rate_limited", message: "too many requests" } }),
          );
        }
      }
      const upstream = httpRequest(
        new URL(path, stack.url),
        { method: req.method, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      upstream.on("error", () => res.destroy());
      req.pipe(upstream);
    });
    const port = await freePort();
    await new Promise<void>((listening) => proxy.listen(port, "127.0.0.1", listening));
    cleanups.push(() => {
      proxy.closeAllConnections();
      return new Promise((closed) => proxy.close(closed));
    });

    const watch = await runCli(["watch", id], {
      ...cliEnv(),
      LOOPRUN_URL: `http://127.0.0.1:${port}`,
    });
    expect(failures, watch.output).toEqual([]);
    expect(watch.code, watch.output).toBe(0);
    expect(watch.stdout).toContain(`run ${id} succeeded (success)`);
    const notices = linesWith(watch.output, "retrying…");
    expect(notices, watch.output).toHaveLength(3);
    expect(notices[0], watch.output).toMatch(/^connection to the API lost \(.+\), retrying…$/);
    expect(notices[1]).toBe("the API answered 503 unavailable: restarting, retrying…");
    expect(notices[2]).toBe("the API answered 429 rate_limited: too many requests, retrying…");
    expect(watch.output).not.toContain("cannot reach");
  });

  it("ends quietly when its reader goes away (`looprun watch ID | head -1`)", async () => {
    const id = await submitLongRun();
    const watch = startWatch(id);
    await waitFor(() => watch.stdout().length > 0, { message: "the first line" });
    watch.child.stdout?.destroy();

    const exit = await watch.exited;
    // As a C program killed by SIGPIPE (128 + 13): no stack trace, no "Error: write EPIPE".
    expect(exit.code, watch.output()).toBe(141);
    expect(watch.output()).not.toMatch(/EPIPE|Error|\n\s+at /);
  });

  it("on a terminal, Ctrl-C clears the progress line, says the run goes on and how to stop it, and exits 130", async () => {
    const id = await submitLongRun();
    // `script` gives the watch a terminal; ^C on it is the terminal's SIGINT, as a person sends it.
    const command = [process.execPath, LOOPRUN_BIN, "watch", id].map(shq).join(" ");
    const terminal: ChildProcess = spawn("script", ["-qfec", command, "/dev/null"], {
      env: { ...cliEnv(), TERM: "xterm" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    cleanups.push(() => terminal.kill("SIGKILL"));
    let output = "";
    terminal.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exited = new Promise<number | null>((done) => terminal.once("exit", done));
    await waitFor(() => /iteration 1 started[\s\S]*▸ iteration 1 of 200/.test(output), {
      message: "the progress line",
    });

    terminal.stdin?.write("\x03");
    expect(await exited, output).toBe(130);
    const afterLastProgress = output.slice(output.lastIndexOf("▸"));
    // The line is cleared (\r, erase line) before the note, which ends with a new line.
    expect(afterLastProgress, JSON.stringify(afterLastProgress)).toMatch(
      new RegExp(
        `\\r\\x1b\\[2K[^▸]*looprun: stopped watching; run ${id} goes on \\(stop it: looprun stop ${id}\\)\\r?\\n$`,
      ),
    );
    expect((await getRun(stack, id)).status).toBe("running");
  });
});
