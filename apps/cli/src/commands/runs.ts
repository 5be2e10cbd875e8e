import { type ApiClient, clientFromEnv, type FlagNames, runPath } from "../api-client";
import { fail } from "../lifecycle";
import { WatchInterrupted, watchRun } from "./watch";
import { printable, shorten } from "./watch-events";

export interface SubmitOptions {
  task: string;
  agent: string;
  agentTimeout?: string;
  session?: string;
  workspace?: string;
  test?: string;
  validate?: string[];
  promise?: string;
  requirements?: string;
  file?: string[];
  maxIterations?: string;
  maxMinutes?: string;
  cooldown?: string;
  successThreshold?: string;
  maxStalled?: string;
  rollbackOnFailure?: boolean;
  watch?: boolean;
  json?: boolean;
}

/**
 * A whole number written in decimal digits, nothing else: `Number()` would take "" as 0, "0x3"
 * as 3 and "1e3" as 1000, and 2.5 would reach the API to be refused under its field's name.
 */
const int = (value: string | undefined, flag: string) => {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) fail(`${flag} must be a whole number, got ${shown(value)}`);
  return Number(value);
};

/** A decimal number (`0.5`, `2`, `.75`): for the flags whose field takes fractions. */
const decimal = (value: string | undefined, flag: string) => {
  if (value === undefined) return undefined;
  if (!/^(\d+(\.\d*)?|\.\d+)$/.test(value))
    fail(`${flag} must be a decimal number such as 0.5, got ${shown(value)}`);
  return Number(value);
};

const shown = (value: string) => (value.trim() === "" ? JSON.stringify(value) : value);

/** The submission's fields set by a flag: the API's 400 names the flag. */
const SUBMIT_FLAGS: FlagNames = {
  task: "--task",
  "agent.command": "--agent",
  "agent.timeoutMs": "--agent-timeout",
  sessionId: "--session",
  workspace: "--workspace",
  testCommand: "--test",
  validationCommands: "--validate",
  completionPromise: "--promise",
  requirements: "--requirements",
  filePaths: "--file",
  maxIterations: "--max-iterations",
  maxMinutes: "--max-minutes",
  cooldownMs: "--cooldown",
  successThreshold: "--success-threshold",
  maxStalledIterations: "--max-stalled",
  rollbackOnFailure: "--rollback-on-failure",
};

const LS_FLAGS: FlagNames = {
  sessionId: "--session",
  status: "--status",
  limit: "-n/--limit",
  cursor: "--cursor",
};

export async function submitCommand(opts: SubmitOptions): Promise<void> {
  const client = clientFromEnv();
  // The API's own refusal names `review` too, which the CLI has no flag for.
  if (opts.test === undefined && !opts.validate?.length && opts.promise === undefined) {
    fail("at least one gate is required: --test, --validate or --promise");
  }
  const body = {
    task: opts.task,
    agent: {
      type: "command",
      command: opts.agent,
      timeoutMs: int(opts.agentTimeout, "--agent-timeout"),
    },
    sessionId: opts.session,
    workspace: opts.workspace,
    testCommand: opts.test,
    validationCommands: opts.validate,
    completionPromise: opts.promise,
    requirements: opts.requirements,
    filePaths: opts.file,
    maxIterations: int(opts.maxIterations, "--max-iterations"),
    maxMinutes: decimal(opts.maxMinutes, "--max-minutes"),
    cooldownMs: int(opts.cooldown, "--cooldown"),
    successThreshold: decimal(opts.successThreshold, "--success-threshold"),
    maxStalledIterations: int(opts.maxStalled, "--max-stalled"),
    rollbackOnFailure: opts.rollbackOnFailure,
  };
  const created = await client.request<{ id: string; sessionId: string }>(
    "POST",
    "/api/runs",
    body,
    { flags: SUBMIT_FLAGS },
  );
  if (opts.json) process.stdout.write(`${JSON.stringify(created)}\n`);
  else process.stdout.write(`submitted run ${created.id} (session ${created.sessionId})\n`);
  if (opts.watch) await watchToTheEnd(client, created.id, opts.json === true);
}

export async function watchCommand(id: string): Promise<void> {
  await watchToTheEnd(clientFromEnv(), id, false);
}

/**
 * Watches a run until it ends: exit 0 when it succeeded, 1 otherwise. Ctrl-C ends the watch,
 * not the run (130, as a shell's Ctrl-C); a second Ctrl-C kills at once. With `json`, stdout
 * stays JSON lines: the progress goes to stderr, and the run as it ended to stdout.
 */
async function watchToTheEnd(client: ApiClient, id: string, json: boolean): Promise<void> {
  const interrupt = new AbortController();
  const onInterrupt = () => interrupt.abort();
  process.once("SIGINT", onInterrupt);
  try {
    const out = json ? process.stderr : process.stdout;
    const run = await watchRun(client, id, out, { signal: interrupt.signal });
    if (json) process.stdout.write(`${JSON.stringify(run)}\n`);
    process.exitCode = run.status === "succeeded" ? 0 : 1;
  } catch (error) {
    if (!(error instanceof WatchInterrupted)) throw error;
    process.stderr.write(
      `looprun: stopped watching; run ${id} goes on (stop it: looprun stop ${id})\n`,
    );
    process.exitCode = 130;
  } finally {
    process.off("SIGINT", onInterrupt);
  }
}

interface RunRow {
  id: string;
  sessionId: string;
  status: string;
  reason: string | null;
  iteration: number;
  task: string;
  createdAt: string;
  budget: { maxIterations: number };
}

export async function lsCommand(opts: {
  session?: string;
  status?: string;
  limit?: string;
  cursor?: string;
}) {
  const limit = int(opts.limit, "-n/--limit");
  const q = new URLSearchParams();
  if (opts.session) q.set("sessionId", opts.session);
  if (opts.status) q.set("status", opts.status);
  if (limit !== undefined) q.set("limit", String(limit));
  if (opts.cursor) q.set("cursor", opts.cursor);
  const page = await clientFromEnv().request<{ items: RunRow[]; nextCursor: string | null }>(
    "GET",
    q.size > 0 ? `/api/runs?${q}` : "/api/runs",
    undefined,
    { flags: LS_FLAGS },
  );
  if (page.items.length === 0) {
    // On stderr: a script reading the lines gets none.
    const filtered = Boolean(opts.session || opts.status);
    process.stderr.write(
      opts.cursor ? "no more runs\n" : filtered ? "no runs match\n" : "no runs yet\n",
    );
  }
  for (const r of page.items) {
    // One line a run: a task's line breaks and tabs as spaces, its control characters dropped.
    const oneLine = printable(r.task).replace(/\s+/g, " ");
    const task = shorten(oneLine, 50);
    process.stdout.write(
      `${r.id}  ${r.status.padEnd(10)} ${`${r.iteration}/${r.budget.maxIterations}`.padEnd(6)} ${r.sessionId.padEnd(26)} ${task}\n`,
    );
  }
  if (page.nextCursor) {
    // The next page of the same list: the filters and the page size go with the cursor.
    const next = ["looprun ls"];
    if (opts.session) next.push(`--session ${shellWord(opts.session)}`);
    if (opts.status) next.push(`--status ${shellWord(opts.status)}`);
    if (limit !== undefined) next.push(`-n ${limit}`);
    next.push(`--cursor ${shellWord(page.nextCursor)}`);
    process.stdout.write(`more: ${next.join(" ")}\n`);
  }
}

/** `value` as one word for a shell: quoted when it holds anything but safe characters. */
const shellWord = (value: string) =>
  /^[A-Za-z0-9_.,:=@%+/-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;

export async function showCommand(id: string): Promise<void> {
  const client = clientFromEnv();
  const run = await client.request<Record<string, unknown>>("GET", runPath(id));
  const iterations = await client.request<{ items: unknown[] }>("GET", runPath(id, "/iterations"));
  process.stdout.write(`${JSON.stringify({ ...run, iterations: iterations.items }, null, 2)}\n`);
}

export async function stopCommand(id: string): Promise<void> {
  const res = await clientFromEnv().request<{ id: string; status: string }>(
    "POST",
    runPath(id, "/stop"),
  );
  process.stdout.write(`run ${res.id}: ${res.status}\n`);
}

export async function rollbackCommand(id: string, opts: { iteration: string }): Promise<void> {
  const iteration = int(opts.iteration, "--iteration");
  const res = await clientFromEnv().request<{
    id: string;
    iteration: number;
    snapshot: string;
    files: { path: string; change: string }[];
  }>("POST", runPath(id, "/rollback"), { iteration }, { flags: { iteration: "--iteration" } });
  const where = res.iteration === 0 ? "as before the run" : `as after iteration ${res.iteration}`;
  process.stdout.write(
    `run ${res.id}: workspace restored ${where} (snapshot ${res.snapshot.slice(0, 12)}), ${res.files.length} file${res.files.length === 1 ? "" : "s"} changed back\n`,
  );
  // Paths the agent chose: printed without control characters, as watch prints its events.
  for (const f of res.files) {
    process.stdout.write(
      `  ${f.change === "removed" ? "removed " : "restored"} ${printable(f.path)}\n`,
    );
  }
}
