// DATABASE_URL in both apps' environments: PostgreSQL when set, a clear stop naming the
// variable when it is not a PostgreSQL URL, and never its password in the message.
import { spawnSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseApiEnv } from "../apps/api/src/env";
import { parseWorkerEnv } from "../apps/worker/src/env";
import { postgresAdminUrl } from "./support/pg-test-database";
import { LOOPRUN_BIN, tempDir } from "./support/stack";

const parsers = [
  ["API", parseApiEnv],
  ["worker", parseWorkerEnv],
] as const;

describe.each(parsers)("DATABASE_URL in the %s's environment", (_, parse) => {
  it("takes postgres:// and postgresql:// URLs, with DATABASE_PATH kept for SQLite", () => {
    for (const url of [
      "postgres://looprun:pw@db.internal:5432/looprun",
      "postgresql://db/looprun?sslmode=require",
    ]) {
      const env = parse({ DATABASE_URL: url, DATABASE_PATH: "/data/looprun.db" });
      expect(env.DATABASE_URL).toBe(url);
      expect(env.DATABASE_PATH).toBe("/data/looprun.db");
      expect(env.DATABASE_POOL_SIZE).toBe(10);
    }
  });

  it("leaves SQLite the default: unset or empty", () => {
    expect(parse({}).DATABASE_URL).toBeUndefined();
    expect(parse({ DATABASE_URL: " " }).DATABASE_URL).toBeUndefined();
    expect(parse({}).DATABASE_PATH).toBe(".looprun/looprun.db");
  });

  it("stops with the variable's name, and without its password, on another URL", () => {
    for (const url of ["mysql://u:hunter2-secret@h/db", "/var/lib/looprun.db", "postgres://"]) {
      let message = "";
      try {
        parse({ DATABASE_URL: url });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message, url).toMatch(/DATABASE_URL: must be a postgres:\/\/ or postgresql:\/\/ URL/);
      expect(message).not.toContain("hunter2-secret");
    }
    expect(() => parse({ DATABASE_POOL_SIZE: "0" })).toThrow(/DATABASE_POOL_SIZE/);
  });

  it("says what to fix in a postgres URL that does not parse, without its password", () => {
    for (const url of [
      "postgres://u:pa#hunter2-secret@127.0.0.1:5432/db",
      "postgres://u:hunter2-secret@127.0.0.1:99999/db",
    ]) {
      let message = "";
      try {
        parse({ DATABASE_URL: url });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message, url).toContain("DATABASE_URL: is a postgres:// URL that does not parse");
      expect(message).toContain("percent-encode");
      expect(message).not.toContain("hunter2-secret");
    }
  });
});

describe("looprun api and worker with a bad DATABASE_URL", () => {
  it.each(["api", "worker"])("%s exits at once, naming DATABASE_URL", (command) => {
    const res = spawnSync(process.execPath, [LOOPRUN_BIN, command], {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        PORT: "0",
        DATABASE_URL: "mysql://app:hunter2-secret@127.0.0.1:1/looprun",
      },
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(res.status).not.toBe(0);
    expect(res.stderr).toContain("DATABASE_URL");
    expect(`${res.stdout}${res.stderr}`).not.toContain("hunter2-secret");
    expect(`${res.stdout}${res.stderr}`).not.toContain("ssl-key-secret");
  });
});

describe("looprun api and worker with a database they cannot use", () => {
  const run = (command: string, env: Record<string, string>) =>
    spawnSync(process.execPath, [LOOPRUN_BIN, command], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, PORT: "0", ...env },
      encoding: "utf8",
      timeout: 30_000,
    });

  it.each(["api", "worker"])(
    "%s names DATABASE_PATH and the file that is no database",
    (command) => {
      const dir = tempDir();
      try {
        const file = join(dir, "notes.txt");
        writeFileSync(file, "not a database, but a text file of some length\n".repeat(100));
        const res = run(command, { DATABASE_PATH: file });
        expect(res.status).toBe(1);
        expect(res.stderr).toContain(`DATABASE_PATH: cannot use ${file} as the SQLite database`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it("names DATABASE_URL, without its passwords, for a database that does not exist", () => {
    const url = new URL(postgresAdminUrl());
    url.pathname = "/looprun_no_such_database";
    url.password = "hunter2-secret";
    // The client key's passphrase, a parameter of node-postgres' URLs.
    url.searchParams.set("sslpassword", "ssl-key-secret");
    url.searchParams.set("sslmode", "disable");
    const res = run("api", { DATABASE_URL: url.toString() });
    expect(res.status).toBe(1);
    expect(res.stderr).toMatch(
      /DATABASE_URL: cannot use postgres(ql)?:\/\/.*looprun_no_such_database/,
    );
    expect(res.stderr).toContain("does not exist");
    expect(`${res.stdout}${res.stderr}`).not.toContain("hunter2-secret");
    expect(`${res.stdout}${res.stderr}`).not.toContain("ssl-key-secret");
  });
});
