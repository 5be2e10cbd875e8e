// The whole system on PostgreSQL (issue #10): two `looprun api` and three `looprun worker`
// processes on one PostgreSQL database and one Redis, as on several hosts. Runs converge on
// all three workers; 40 concurrent submits to one session through both APIs leave one run; a
// worker killed with SIGKILL mid-iteration is replaced without a duplicated iteration; a stop
// through either API reaches the worker; both APIs answer history queries alike.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  type ApiProcess,
  countEvents,
  ensureWorkers,
  expectIterationsOnce,
  killGroup,
  RECOVERY,
  startApiProcess,
  submitUntilAgentRuns,
  waitForDeath,
  workerWithPid,
} from "./support/cluster";
import { freshPostgresDatabase } from "./support/pg-test-database";
import {
  commandRun,
  expectWellFormedEvents,
  getEvents,
  getIterations,
  isAlive,
  readPid,
  type Stack,
  shq,
  startStack,
  submit,
  waitForEvent,
  waitForStatus,
} from "./support/stack";

/** Leases of a few seconds: a killed worker's run is taken over soon. */
const ENV = {
  LOOPRUN_LOCK_MS: "5000",
  LOOPRUN_STALLED_INTERVAL_MS: "2000",
  LOOPRUN_RECONCILE_MS: "1000",
  // One run per worker: three runs running at once are on three workers.
  WORKER_CONCURRENCY: "1",
  DATABASE_POOL_SIZE: "4",
};
/**
 * The test cluster trusts local connections, so a password in DATABASE_URL is never asked
 * for: it only has to stay out of everything the processes write.
 */
const PASSWORD = "pg-Secret-9f3k2m";
const HOLD_UNTIL_RELEASED = "while [ ! -f release ]; do sleep 0.1; done";

let database: Awaited<ReturnType<typeof freshPostgresDatabase>>;
let stack: Stack;
let api2: ApiProcess;

beforeAll(async () => {
  database = await freshPostgresDatabase("looprun_e2e");
  const withPassword = new URL(database.url);
  withPassword.password = PASSWORD;
  stack = await startStack({
    redisUrl: inject("redisUrl"),
    databaseUrl: withPassword.toString(),
    workers: 3,
    // Info: the start-up lines name the database (its URL without the password).
    env: { ...ENV, LOG_LEVEL: "info" },
  });
  api2 = await startApiProcess(stack);
}, 120_000);

afterAll(async () => {
  await api2?.stop();
  await stack?.stop();
  await database?.drop();
});

const logs = () => `${stack.logs()}\n--- api 2\n${api2.proc.output().slice(-4000)}`;
const unique = (name: string) => `${name}-${Math.random().toString(36).slice(2, 8)}`;

describe("API and workers on PostgreSQL", () => {
  it("keep their data in PostgreSQL, not in a SQLite file, and report it ready", async () => {
    for (const api of [stack.api, api2.api]) {
      expect(await api("GET", "/readyz")).toMatchObject({
        status: 200,
        body: { redis: "up", db: "up" },
      });
    }
    const { id } = await submit(stack, commandRun("true", { testCommand: "true" }));
    await waitForStatus(stack, id, ["succeeded"]);
    // DATABASE_PATH is set too: DATABASE_URL wins, and no process created the file.
    expect(existsSync(stack.databasePath)).toBe(false);
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const { rows } = await client.query("select status from runs where id = $1", [id]);
      expect(rows).toEqual([{ status: "succeeded" }]);
      const apps = await client.query(
        "select distinct application_name as name from pg_stat_activity where datname = current_database()",
      );
      const names = apps.rows.map((r: { name: string }) => r.name);
      expect(names).toEqual(expect.arrayContaining(["looprun-api", "looprun-worker"]));
    } finally {
      await client.end();
    }
  });

  it("runs submitted through both APIs converge, on all three workers at once", async () => {
    ensureWorkers(stack, 3);
    // Iteration 1 of each run waits until the three runs hold a worker each (one run per
    // worker), then fails its test; iteration 2 passes.
    const barrier = join(stack.dir, unique("barrier"));
    mkdirSync(barrier);
    const agent = [
      'if [ "$LOOPRUN_ITERATION" = 1 ]; then',
      `  echo $LOOPRUN_WORKER_PID > ${shq(barrier)}/"$LOOPRUN_RUN_ID"`,
      `  while [ "$(ls ${shq(barrier)} | wc -l)" -lt 3 ]; do sleep 0.1; done`,
      "fi",
      'echo "$LOOPRUN_ITERATION" > count',
    ].join("\n");
    const body = commandRun(agent, { testCommand: 'test "$(cat count)" -ge 2' });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await (i % 2 === 0 ? stack.api : api2.api)("POST", "/api/runs", body);
      expect(res.status, JSON.stringify(res.body)).toBe(202);
      ids.push(res.body.id);
    }
    for (const id of ids) {
      const run = await waitForStatus(stack, id, ["succeeded"], RECOVERY);
      expect(run).toMatchObject({ reason: "success", iteration: 2, metrics: { iterations: 2 } });
      expectIterationsOnce(await getIterations(stack, id));
      const events = await getEvents(stack, id);
      expectWellFormedEvents(events);
      expect(countEvents(events, "run_finished")).toBe(1);
    }
    const pids = readdirSync(barrier).map((f) => readFileSync(join(barrier, f), "utf8").trim());
    const workerPids = stack.workers.map((w) => String(w.pid));
    expect(new Set(pids).size, logs()).toBe(3);
    for (const pid of pids) expect(workerPids).toContain(pid);
  }, 150_000);

  it("accepts exactly one of 40 concurrent submits to one session through two APIs", async () => {
    const sessionId = unique("race");
    const body = commandRun(HOLD_UNTIL_RELEASED, { sessionId, testCommand: "true" });
    const replies = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        (i % 2 === 0 ? stack.api : api2.api)("POST", "/api/runs", body, { timeoutMs: 30_000 }),
      ),
    );
    const accepted = replies.filter((r) => r.status === 202);
    expect(accepted, `statuses: ${replies.map((r) => r.status).join(",")}\n${logs()}`).toHaveLength(
      1,
    );
    const winner = accepted[0]?.body.id as string;
    for (const r of replies.filter((x) => x.status !== 202)) {
      expect(r.status, JSON.stringify(r.body)).toBe(409);
      expect(r.body.error).toMatchObject({ code: "run_already_active", activeRunId: winner });
    }
    for (const api of [stack.api, api2.api]) {
      const session = await api("GET", `/api/sessions/${sessionId}`);
      expect(session.body.activeRunId).toBe(winner);
      expect(session.body.runs.map((r: { id: string }) => r.id)).toEqual([winner]);
    }
    const running = await waitForStatus(stack, winner, ["running"]);
    // Released once its agent runs (a run is `running` before its workspace is made).
    await waitForEvent(stack, winner, "agent_started");
    writeFileSync(join(running.workspace, "release"), "");
    expect(await waitForStatus(stack, winner)).toMatchObject({ status: "succeeded" });
    const events = await getEvents(stack, winner);
    expect(countEvents(events, "run_queued")).toBe(1);
  }, 120_000);

  it("resumes on another worker the run of a worker killed with SIGKILL mid-iteration", async () => {
    ensureWorkers(stack, 3);
    const agent = [
      'n="$LOOPRUN_ITERATION"',
      'if [ "$n" = 2 ] && [ ! -f crashed-once ]; then touch crashed-once; echo $LOOPRUN_WORKER_PID > worker.pid; echo $$ > agent.pid; exec sleep 300; fi',
      'if [ "$n" -ge 3 ]; then touch done; fi',
    ].join("\n");
    const { id, running, agentPid } = await submitUntilAgentRuns(
      stack,
      agent,
      { testCommand: "test -f done" },
      { message: "the agent of iteration 2 writing its pid", ...RECOVERY },
    );
    try {
      const doomed = workerWithPid(stack, readPid(join(running.workspace, "worker.pid"))!);
      expect((await doomed.stop("SIGKILL")).signal).toBe("SIGKILL");
      expect(isAlive(agentPid)).toBe(true);

      const run = await waitForStatus(stack, id, undefined, RECOVERY);
      expect(run, logs()).toMatchObject({
        status: "succeeded",
        reason: "success",
        iteration: 3,
        metrics: { iterations: 3 },
      });
      const iterations = await getIterations(stack, id);
      expect(expectIterationsOnce(iterations)).toEqual([
        [1, 1, "failed"],
        [2, 1, "abandoned"],
        [2, 2, "failed"],
        [3, 1, "passed"],
      ]);
      // The worker that resumed the run killed the agent the crashed one left behind.
      await waitForDeath(agentPid, "the orphaned agent");
      const events = await getEvents(stack, id);
      expectWellFormedEvents(events);
      expect(events.filter((e) => e.type === "run_resumed").map((e) => e.data)).toEqual([
        expect.objectContaining({ iteration: 2, abandonedAttempt: 1 }),
      ]);
      expect(countEvents(events, "run_finished")).toBe(1);
    } finally {
      killGroup(agentPid);
      ensureWorkers(stack, 3);
    }
  }, 150_000);

  it("stops a running run through the other API process", async () => {
    ensureWorkers(stack, 3);
    const { id, agentPid } = await submitUntilAgentRuns(
      stack,
      "echo $$ > agent.pid; exec sleep 300",
    );
    try {
      const stop = await api2.api("POST", `/api/runs/${id}/stop`);
      expect(stop.status).toBe(202);
      expect(["stopping", "stopped"]).toContain(stop.body.status);
      expect(await waitForStatus(stack, id, ["stopped"])).toMatchObject({ reason: "stopped" });
      await waitForDeath(agentPid, "the stopped run's agent");
      await waitForEvent(stack, id, "run_finished");
    } finally {
      killGroup(agentPid);
    }
  }, 120_000);

  it("keeps the database password out of commands, stored runs and logs", async () => {
    const { id } = await submit(
      stack,
      commandRun('env > env.txt; echo "url: $DATABASE_URL"', {
        task: `the database password is ${PASSWORD}`,
        testCommand: "true",
      }),
    );
    const run = await waitForStatus(stack, id, ["succeeded"]);
    expect(run.task).toBe("the database password is [REDACTED]");
    const env = readFileSync(join(run.workspace, "env.txt"), "utf8");
    expect(env).not.toContain("DATABASE_URL");
    expect(env).not.toContain(PASSWORD);
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const { rows } = await client.query(
        `select ((select count(*) from runs where spec::text like $1 or task like $1)
           + (select count(*) from events where data::text like $1)
           + (select count(*) from iterations where prompt like $1 or agent::text like $1))::int as n`,
        [`%${PASSWORD}%`],
      );
      expect(rows[0].n).toBe(0);
    } finally {
      await client.end();
    }
    // Every process's whole output (stdout and stderr): their start-up lines name the database.
    const output = [stack.apiProcess, api2.proc, ...stack.workers]
      .map((p) => p.output())
      .join("\n");
    expect(output).toMatch(
      /"database":"postgres:\/\/postgres:\[REDACTED\]@127\.0\.0\.1:\d+\/looprun_e2e/,
    );
    expect(output).toContain("looprun worker ready");
    expect(output).not.toContain(PASSWORD);
  });

  it("answers history queries alike through both API processes", async () => {
    for (const path of [
      "/api/runs?limit=3",
      "/api/runs?status=succeeded&limit=100",
      "/api/stats",
      "/api/stats/tools",
    ]) {
      const [a, b] = await Promise.all([stack.api("GET", path), api2.api("GET", path)]);
      expect(a.status, path).toBe(200);
      expect(b.body, path).toEqual(a.body);
    }
    const page1 = await api2.api("GET", "/api/runs?limit=2");
    const page2 = await stack.api("GET", `/api/runs?limit=2&cursor=${page1.body.nextCursor}`);
    expect(page2.status).toBe(200);
    expect(page2.body.items[0].id < page1.body.items[1].id).toBe(true);
    // seq is a 32-bit integer column here: a larger `after` (any 15 digits pass the API) is
    // past every event, as on SQLite, not a query PostgreSQL refuses.
    const events = (after: number) => `/api/runs/${page1.body.items[0].id}/events?after=${after}`;
    expect((await stack.api("GET", events(2147483648))).body).toEqual({ items: [] });
    expect((await stack.api("GET", events(999999999999999))).status).toBe(200);
    const stats = await stack.api("GET", "/api/stats");
    expect(stats.body.runs.byStatus.succeeded).toBeGreaterThanOrEqual(6);
    expect(stats.body.runs.byStatus.stopped).toBeGreaterThanOrEqual(1);
  });
});
