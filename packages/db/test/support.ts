import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  type EngineResources,
  normalizeSubmission,
  type RunStore,
  RunSubmission,
} from "@looprun/core";
import {
  type Database,
  MIGRATIONS_FOLDER,
  type NewRun,
  openDatabase,
  RunRepository,
  SqliteRunStore,
} from "@looprun/db";
import { afterEach, beforeEach } from "vitest";

import { isAlive } from "../../../tests/support/processes";
import { testSnapshotsDir } from "../../../tests/support/snapshots-dir";

/** Shared with every suite (tests/support): whether a process is alive, the snapshots directory. */
export { isAlive, testSnapshotsDir };

/**
 * When the migration `tag` of a migrations folder was made (its record's `created_at`): a test
 * that removes the records from there on makes a database of the version before it.
 */
export function migrationTime(folder: string, tag: string): number {
  const journal = JSON.parse(readFileSync(join(folder, "meta/_journal.json"), "utf8")) as {
    entries: { tag: string; when: number }[];
  };
  const entry = journal.entries.find((e) => e.tag === tag);
  if (!entry) throw new Error(`no migration ${tag}`);
  return entry.when;
}

export async function tempDir(prefix = "looprun-db-test-"): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix));
}

export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

/** What `freshStoreForEachTest` makes for each test. */
export interface FreshStore {
  dir: string;
  database: Database;
  repo: RunRepository;
  store: SqliteRunStore;
}

/**
 * A fresh database, its repository and its run store for each test of the calling block (made
 * before each, closed and removed after): read its fields inside a test.
 */
export function freshStoreForEachTest(): FreshStore {
  const fresh = {} as FreshStore;
  beforeEach(async () => {
    const { dir, database } = await freshDatabase();
    Object.assign(fresh, {
      dir,
      database,
      repo: new RunRepository(database.db),
      store: new SqliteRunStore(database.db),
    });
  });
  afterEach(async () => {
    fresh.database.close();
    await removeDir(fresh.dir);
  });
  return fresh;
}

/** A fresh database file in its own temporary directory. */
export async function freshDatabase(): Promise<{ dir: string; path: string; database: Database }> {
  const dir = await tempDir();
  const path = join(dir, "looprun.db");
  return { dir, path, database: openDatabase(path) };
}

/**
 * A SQLite database as the version before migration `tag` left it — migrated, `seed` writing
 * the rows as that version did, the records of `tag` and later removed — handed to `read`
 * reopened, those migrations applied again as an upgrade applies them.
 */
export async function upgradedSqlite<T>(
  tag: string,
  seed: (sqlite: Database["sqlite"]) => void,
  read: (database: Database) => T,
): Promise<T> {
  const { dir, path, database } = await freshDatabase();
  try {
    try {
      seed(database.sqlite);
      database.sqlite
        .prepare("delete from __drizzle_migrations where created_at >= ?")
        .run(migrationTime(MIGRATIONS_FOLDER, tag));
    } finally {
      database.close();
    }
    const reopened = openDatabase(path);
    try {
      return read(reopened);
    } finally {
      reopened.close();
    }
  } finally {
    await removeDir(dir);
  }
}

let counter = 0;

/** Input for `RunRepository.createRun`; ids sort by creation order. */
export function newRun(
  body: Record<string, unknown>,
  opts: { sessionId?: string; workspace?: string; createdAt?: number; id?: string } = {},
): NewRun {
  counter += 1;
  const workspace = opts.workspace ?? "/tmp/looprun-ws";
  return {
    id: opts.id ?? `run-${String(counter).padStart(6, "0")}`,
    sessionId: opts.sessionId ?? `session-${counter}`,
    sessionWorkspace: workspace,
    workspace,
    spec: normalizeSubmission(
      RunSubmission.parse({
        task: "make the checks pass",
        agent: { type: "command", command: "true" },
        testCommand: "true",
        ...body,
      }),
    ),
    createdAt: opts.createdAt ?? Date.now(),
  };
}

export function readPids(path: string): number[] {
  return readFileSync(path, "utf8")
    .split(/\s+/)
    .filter((s) => s.length > 0)
    .map(Number);
}

export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 15_000,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export function resources(store: RunStore, extra: Partial<EngineResources> = {}): EngineResources {
  return {
    store,
    logger: { info() {}, warn() {}, error() {} },
    commandEnv: process.env,
    envAllowlist: [],
    stopPollMs: 50,
    snapshotsDir: testSnapshotsDir(),
    ...extra,
  };
}

const WORKER = fileURLToPath(new URL("./fixtures/db-worker.ts", import.meta.url));

export interface WorkerResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface WorkerHandle {
  /** Resolves once the process is up and waits for its go file. */
  ready: Promise<void>;
  done: Promise<WorkerResult>;
}

/** Starts `fixtures/db-worker.ts` in a separate Node process (through tsx). */
export function startWorker(args: string[]): WorkerHandle {
  const child = spawn(process.execPath, ["--import", "tsx", WORKER, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  let onReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    onReady = resolve;
  });
  child.stdout.on("data", (c: Buffer) => {
    stdout += c.toString();
    if (stdout.includes("ready\n")) onReady();
  });
  child.stderr.on("data", (c: Buffer) => {
    stderr += c.toString();
  });
  const done = new Promise<WorkerResult>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => {
      onReady();
      resolve({ code, stdout, stderr });
    });
  });
  return { ready, done };
}

/** The JSON line a worker printed last. */
export function workerOutput(result: WorkerResult): unknown {
  if (result.code !== 0) throw new Error(`worker failed (${result.code}): ${result.stderr}`);
  const line = result.stdout.trim().split("\n").at(-1) ?? "";
  return JSON.parse(line);
}
