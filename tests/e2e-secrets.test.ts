import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { FakeMistral, finish } from "./support/fake-mistral";
import { dumpRedis } from "./support/redis-dump";
import {
  getIterations,
  isAlive,
  readPid,
  type Stack,
  startStack,
  tempDir,
  waitFor,
  waitForStatus,
} from "./support/stack";

const API_TOKEN = "api-token-e2e-0123456789abcdef";
const MISTRAL_KEY = "mistral-key-e2e-0123456789abcdef";
const ALLOWED_SECRET = "allowed-agent-key-0123456789";
const auth = { headers: { authorization: `Bearer ${API_TOKEN}` } };

/** Secrets stay out of the DB file, Redis and logs, whatever the agent prints. */
describe("secrets, hostile commands and the mistral agent through real processes", () => {
  const fake = new FakeMistral();
  let stack: Stack;
  let scratch: string;

  beforeAll(async () => {
    await fake.start();
    scratch = tempDir("looprun-secrets-");
    stack = await startStack({
      redisUrl: inject("redisUrl"),
      env: {
        API_TOKEN,
        MISTRAL_API_KEY: MISTRAL_KEY,
        MISTRAL_SERVER_URL: fake.url,
        AGENT_ENV_ALLOWLIST: "AGENT_SERVICE_API_KEY",
        AGENT_SERVICE_API_KEY: ALLOWED_SECRET,
        LOG_LEVEL: "debug",
        LOOPRUN_OUTPUT_CAP_BYTES: "65536",
      },
    });
  });
  afterAll(async () => {
    await stack?.stop();
    await fake.stop();
  });
  /** The stack, its requests carrying the token. */
  const authed = (): Stack => ({
    ...stack,
    api: (method, path, body, opts) => stack.api(method, path, body, { ...opts, ...auth }),
  });

  it("answers 401 without the token", async () => {
    for (const [method, path] of [
      ["GET", "/api/runs"],
      ["POST", "/api/runs"],
      ["GET", "/api/runs/x"],
      ["POST", "/api/runs/x/stop"],
      ["GET", "/api/sessions/x"],
      ["GET", "/api/stats/tools"],
    ] as const) {
      const res = await stack.api(method, path, method === "POST" ? {} : undefined);
      expect(res.status, `${method} ${path}`).toBe(401);
      expect(res.body.error.code).toBe("unauthorized");
    }
    expect((await stack.api("GET", "/healthz")).status).toBe(200);
  });

  it("caps a 30 MB flood, keeps secrets out of the output, and leaves no process behind", async () => {
    const pidFile = join(scratch, "bg.pid");
    // The secrets are made at run time (a command may not write one out): they reach the
    // output, after the flood, in the tail that is kept.
    const reveal = (secret: string) =>
      `$(echo ${Buffer.from(secret).toString("base64")} | base64 -d)`;
    const agent = [
      `sleep 300 & echo $! > ${pidFile}`,
      "head -c 31457280 /dev/zero | tr '\\0' 'x'",
      "echo; env",
      `echo "token: ${reveal(API_TOKEN)} key: ${reveal(MISTRAL_KEY)} allowed: $AGENT_SERVICE_API_KEY"`,
      `echo OPENAI_API_KEY=${reveal("sk-proj-abcdefghijklmnopqrstuvwxyz0123")}`,
      "echo the-end",
    ].join("; ");
    const run = await stack.api(
      "POST",
      "/api/runs",
      {
        task: "flood",
        agent: { type: "command", command: agent },
        testCommand: "true",
        cooldownMs: 0,
      },
      auth,
    );
    expect(run.status).toBe(202);
    const done = await waitForStatus(authed(), run.body.id, ["succeeded"], { timeoutMs: 60_000 });
    expect(done.status).toBe("succeeded");
    const its = await stack.api("GET", `/api/runs/${run.body.id}/iterations`, undefined, auth);
    const output: string = its.body.items[0].agent.output;
    expect(output.length).toBeLessThan(70_000);
    expect(output).toContain("the-end");
    expect(output).toContain("omitted");
    expect(output).toContain("token: [REDACTED] key: [REDACTED] allowed: [REDACTED]\n");
    expect(output).toContain("OPENAI_API_KEY=[REDACTED]\n");
    // The run's LOOPRUN_* variables, not the worker's own settings (where every session's
    // snapshots live, which names are secret).
    expect(output).toContain(`LOOPRUN_RUN_ID=${run.body.id}\n`);
    expect(output).not.toMatch(/^LOOPRUN_(OUTPUT_CAP_BYTES|SNAPSHOTS_DIR|LOCK_MS)=/m);
    const pid = readPid(pidFile);
    expect(pid).toBeDefined();
    await waitFor(() => !isAlive(pid as number), { message: "the background sleep is killed" });
  });

  it("refuses a secret written out in a command, naming the field, storing nothing; a task's is stored redacted", async () => {
    const before = await stack.api("GET", "/api/runs?limit=100", undefined, auth);
    const res = await stack.api(
      "POST",
      "/api/runs",
      {
        task: "deploy",
        agent: { type: "command", command: `./deploy ${API_TOKEN}` },
        validationCommands: ["true", "echo sk-proj-abcdefghijklmnopqrstuvwxyz0123"],
      },
      auth,
    );
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("invalid_request");
    const paths = res.body.error.issues.map((i: { path: string }) => i.path);
    expect(paths.sort()).toEqual(["agent.command", "validationCommands.1"]);
    const messages = Object.fromEntries(
      res.body.error.issues.map((i: { path: string; message: string }) => [i.path, i.message]),
    );
    expect(messages["agent.command"]).toContain("holds the value of one of the API's secrets");
    expect(messages["validationCommands.1"]).toContain("holds what looks like a secret");
    expect(res.body.error.message).toContain("$NAME");
    const after = await stack.api("GET", "/api/runs?limit=100", undefined, auth);
    expect(after.body.items).toHaveLength(before.body.items.length);
    // Named as a variable of the workers', it runs with the value.
    const named = await stack.api(
      "POST",
      "/api/runs",
      {
        task: `the key is ${ALLOWED_SECRET}`,
        agent: { type: "command", command: 'test -n "$AGENT_SERVICE_API_KEY"' },
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell variable, which the command expands
        testCommand: "SERVICE_TOKEN=${AGENT_SERVICE_API_KEY} sh -c 'test -n \"$SERVICE_TOKEN\"'",
        maxIterations: 1,
      },
      // A key is the client's to choose, a token too: the DB keeps only its hash (see below).
      { headers: { ...auth.headers, "idempotency-key": API_TOKEN } },
    );
    expect(named.status).toBe(202);
    const run = await waitForStatus(authed(), named.body.id, ["succeeded"], { timeoutMs: 30_000 });
    expect(run.task).toBe("the key is [REDACTED]");
  });

  it("runs the mistral agent through the worker against the fake Mistral server", async () => {
    fake.reset();
    fake.replies(
      {
        toolCalls: [
          { name: "workspace__write_file", arguments: { path: "answer.txt", content: "42\n" } },
        ],
      },
      {
        toolCalls: [
          {
            name: "workspace__run_command",
            // The command's parent is the workspace server: its command line says how it runs.
            arguments: { command: `env; echo "server: $(tr '\\0' ' ' < /proc/$PPID/cmdline)"` },
          },
        ],
      },
      finish("wrote the answer"),
    );
    const res = await stack.api(
      "POST",
      "/api/runs",
      {
        task: "Write 42 into answer.txt",
        agent: { type: "mistral", model: "mistral-small-latest" },
        testCommand: "grep -q 42 answer.txt",
        cooldownMs: 0,
      },
      auth,
    );
    expect(res.status).toBe(202);
    const run = await waitForStatus(authed(), res.body.id, ["succeeded"], { timeoutMs: 60_000 });
    expect(run.metrics).toMatchObject({ toolCalls: 2, toolFailures: 0, tokens: 300 });
    expect(fake.requests[0]?.authorization).toBe(`Bearer ${MISTRAL_KEY}`);
    const calls = await stack.api("GET", `/api/runs/${res.body.id}/tool-calls`, undefined, auth);
    expect(calls.body.items.map((c: { tool: string }) => c.tool)).toEqual([
      "write_file",
      "run_command",
    ]);
    // The workspace server's commands get the minimal environment: no key of looprun's.
    const envOutput: string = calls.body.items[1].result;
    expect(envOutput).toContain("PATH=");
    expect(envOutput).not.toContain(MISTRAL_KEY);
    expect(envOutput).not.toContain("API_TOKEN");
    // A worker runs from looprun's bundle, and so does its workspace server: no tsx loader.
    const server = /server: (.*)/.exec(envOutput)?.[1] ?? "";
    expect(server).toMatch(/\/node_modules\/\.cache\/looprun\/[^ ]+\/workspace-server\.js /);
    expect(server).not.toContain("tsx");
    const stats = await stack.api("GET", `/api/stats/tools?runId=${res.body.id}`, undefined, auth);
    expect(stats.body.totals).toMatchObject({ calls: 2, failures: 0, successRate: 1 });
    const iterations = await getIterations(authed(), res.body.id);
    expect(iterations[0]?.agent?.exitCode).toBe(0);
  });

  it("finds no secret in the DB file, Redis or the logs", async () => {
    // Let the processes flush their logs and the WAL reach the file.
    const db =
      readFileSync(stack.databasePath).toString("latin1") +
      (() => {
        try {
          return readFileSync(`${stack.databasePath}-wal`).toString("latin1");
        } catch {
          return "";
        }
      })();
    const redis = await dumpRedis(inject("redisUrl"), stack.prefix);
    const logs = stack.logs();
    writeFileSync(join(scratch, "scan.txt"), `${logs.length} bytes of logs scanned`);
    expect(logs.length).toBeGreaterThan(0);
    for (const secret of [
      API_TOKEN,
      MISTRAL_KEY,
      ALLOWED_SECRET,
      "sk-proj-abcdefghijklmnopqrstuvwxyz0123",
    ]) {
      expect(db.includes(secret), `DB contains ${secret}`).toBe(false);
      expect(redis.includes(secret), `Redis contains ${secret}`).toBe(false);
      expect(logs.includes(secret), `logs contain ${secret}`).toBe(false);
    }
    expect(db).toContain("[REDACTED]");
  });
});
