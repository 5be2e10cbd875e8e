import { spawn, spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { freePort } from "./redis-server";

/**
 * A throwaway PostgreSQL cluster for the tests: `initdb` into a temporary directory, a free
 * port on 127.0.0.1, trust authentication, no fsync. The binaries come from `pg_config
 * --bindir`, else the newest /usr/lib/postgresql/N/bin (Debian's `postgresql` package).
 * initdb refuses to run as root: as root the cluster belongs to the `postgres` user that
 * Debian's package creates, and its commands run through `runuser`.
 */
export interface PostgresCluster {
  /** A superuser URL of the cluster's `postgres` database. */
  adminUrl: string;
  port: number;
  /** Stops the server (a fast shutdown: its sessions are ended), keeping its data. */
  halt(): Promise<void>;
  /** Starts a halted server again, on the same port. */
  resume(): Promise<void>;
  /**
   * Pauses the server (SIGSTOP to the postmaster and its processes): connections stay open and
   * nothing answers, as a hung server or a network dropping packets.
   */
  freeze(): Promise<void>;
  /** Lets a frozen server run again (SIGCONT to the processes freeze paused). */
  thaw(): Promise<void>;
  stop(): Promise<void>;
}

export class PostgresUnavailableError extends Error {
  override readonly name = "PostgresUnavailableError";
}

const INSTALL_HINT =
  "install PostgreSQL's server binaries (Debian: `apt-get install -y postgresql`; .ci/run does) " +
  "or set LOOPRUN_TEST_POSTGRES_URL to a superuser URL of a server the tests may create databases on";

interface Command {
  code: number | null;
  output: string;
}

function run(cmd: string, args: string[], cwd: string): Promise<Command> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (c: Buffer) => {
      output += c.toString();
    });
    child.stderr.on("data", (c: Buffer) => {
      output += c.toString();
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, output }));
  });
}

function runSync(cmd: string, args: string[]): string | null {
  const r = spawnSync(cmd, args, { encoding: "utf8" });
  return r.status === 0 ? r.stdout.trim() : null;
}

/** Where initdb, pg_ctl and postgres are, or a PostgresUnavailableError that says what to do. */
export function findPgBinDir(): string {
  const fromConfig = runSync("pg_config", ["--bindir"]);
  if (fromConfig && existsSync(join(fromConfig, "initdb"))) return fromConfig;
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, "bin", "initdb")))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  const newest = versions[0];
  if (newest === undefined) {
    throw new PostgresUnavailableError(`PostgreSQL's initdb was not found: ${INSTALL_HINT}`);
  }
  return join(root, newest, "bin");
}

/** As root, the commands run as `postgres`; its uid and gid own the cluster's directory. */
function clusterOwner(): { uid: number; gid: number } | null {
  if (typeof process.getuid !== "function" || process.getuid() !== 0) return null;
  const uid = runSync("id", ["-u", "postgres"]);
  const gid = runSync("id", ["-g", "postgres"]);
  if (uid === null || gid === null) {
    throw new PostgresUnavailableError(
      "initdb refuses to run as root and there is no `postgres` user to run it as " +
        "(Debian's postgresql package creates one; else: useradd --system postgres)",
    );
  }
  return { uid: Number(uid), gid: Number(gid) };
}

export interface StartPostgresOptions {
  /**
   * Durable like a deployment (fsync, synchronous commit, full page writes), for measurements.
   * @defaultValue false — the tests' cluster skips them: it is thrown away after the run.
   */
  durable?: boolean;
}

export async function startPostgres(opts: StartPostgresOptions = {}): Promise<PostgresCluster> {
  const bin = findPgBinDir();
  const owner = clusterOwner();
  const dir = mkdtempSync(join(tmpdir(), "looprun-pg-"));
  if (owner) chownSync(dir, owner.uid, owner.gid);
  const as = async (tool: string, args: string[]) => {
    const [cmd, argv] = owner
      ? ["runuser", ["-u", "postgres", "--", join(bin, tool), ...args]]
      : [join(bin, tool), args];
    const result = await run(cmd, argv, dir);
    if (result.code !== 0) {
      throw new Error(`${tool} failed (${result.code}): ${result.output.trim()}`);
    }
  };
  const data = join(dir, "data");
  try {
    await as("initdb", [
      "-D",
      data,
      "-U",
      "postgres",
      "--auth=trust",
      "--encoding=UTF8",
      "--no-locale",
      "--no-sync",
    ]);
    const port = await freePort();
    const options = [
      `-p ${port}`,
      "-h 127.0.0.1",
      `-k ${dir}`,
      ...(opts.durable
        ? []
        : ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]),
      "-c max_connections=300",
    ].join(" ");
    const start = () =>
      as("pg_ctl", [
        "-D",
        data,
        "-l",
        join(dir, "postgres.log"),
        "-w",
        "-t",
        "60",
        "-o",
        options,
        "start",
      ]);
    await start();
    let frozen: number[] = [];
    return {
      adminUrl: `postgres://postgres@127.0.0.1:${port}/postgres`,
      port,
      halt: () => as("pg_ctl", ["-D", data, "-m", "fast", "-w", "stop"]),
      resume: start,
      async freeze() {
        const postmaster = Number(
          readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0],
        );
        const children = (runSync("pgrep", ["-P", String(postmaster)]) ?? "")
          .split("\n")
          .filter(Boolean)
          .map(Number);
        frozen = [postmaster, ...children];
        for (const pid of frozen) process.kill(pid, "SIGSTOP");
      },
      async thaw() {
        for (const pid of frozen) {
          try {
            process.kill(pid, "SIGCONT");
          } catch {}
        }
        frozen = [];
      },
      async stop() {
        await as("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]).catch(() => {});
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

let databases = 0;

/** A new, empty database on the cluster behind `adminUrl`; `drop` removes it. */
export async function createDatabase(
  adminUrl: string,
  prefix = "looprun_test",
): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  databases += 1;
  const name = `${prefix}_${process.pid}_${databases}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = async (statement: string) => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE "${name}"`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: () => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`),
  };
}
