// DATABASE_URL in both apps' environments: PostgreSQL when set, a clear stop naming the
// variable when it is not a PostgreSQL URL, and never its password in the message.
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { parseApiEnv } from "../apps/api/src/env";
import { parseWorkerEnv } from "../apps/worker/src/env";
import { LOOPRUN_BIN } from "./support/stack";

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
  });
});
