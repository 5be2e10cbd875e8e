import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RunSubmission } from "@looprun/core";
import { describe, expect, it } from "vitest";
import { parseApiEnv } from "../src/env";
import { useApiHarness } from "./api-harness";

/** A small seeded PRNG (mulberry32), so a failing case can be replayed. */
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const valid = { task: "t", agent: { type: "command", command: "true" }, testCommand: "true" };

const WRONG_VALUES: unknown[] = [
  null,
  true,
  0,
  -1,
  1.5,
  1e308,
  "",
  " ",
  "x".repeat(30_000),
  [],
  [null],
  {},
  { nested: { deep: [1, 2, 3] } },
  "../../etc",
  "/abs",
  "\u0000",
  "DROP TABLE runs;",
];

const FIELDS = [
  "task",
  "sessionId",
  "requirements",
  "filePaths",
  "workspace",
  "testCommand",
  "validationCommands",
  "completionPromise",
  "agent",
  "review",
  "maxIterations",
  "maxAttempts",
  "maxMinutes",
  "maxTokens",
  "cooldownMs",
  "mcpServers",
  "validationTimeoutMs",
  "phases",
  "successThreshold",
  "maxStalledIterations",
  "rollbackOnFailure",
  "approval",
];

/** Each body is invalid for a known reason; they are built from a valid one. */
function invalidBodies(count: number, random: () => number): unknown[] {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)] as T;
  const out: unknown[] = [
    null,
    42,
    "text",
    [],
    [valid],
    {},
    { task: "t" },
    { ...valid, agent: null },
  ];
  while (out.length < count) {
    const kind = random();
    if (kind < 0.6) {
      const field = pick(FIELDS);
      const value = pick(WRONG_VALUES);
      const body = { ...valid, [field]: value };
      // A few combinations happen to be valid (cooldownMs 0, a plain workspace name…): the
      // explicit cases in runs-api.test.ts pin the schema; here only invalid bodies count.
      if (RunSubmission.safeParse(body).success && !(field === "workspace")) continue;
      if (
        field === "workspace" &&
        !(typeof value === "string" && (/^(\/|\.\.|\s*$)/.test(value) || value.includes("\0")))
      )
        continue;
      out.push(body);
    } else if (kind < 0.75) {
      out.push({ ...valid, [`unknown_${Math.floor(random() * 1e6)}`]: pick(WRONG_VALUES) });
    } else if (kind < 0.9) {
      out.push({
        ...valid,
        agent: {
          type: pick(["command", "mistral", "nope", ""]),
          command: pick(WRONG_VALUES),
          extra: 1,
        },
      });
    } else {
      const { testCommand: _t, ...noGate } = valid;
      out.push({ ...noGate, completionPromise: pick(["", "   "]) });
    }
  }
  return out;
}

function invalidQueries(count: number, random: () => number): string[] {
  const bad = ["", "-1", "0", "101", "abc", "1.5", "1e9", "%00", "NaN", "[]", "null", "__proto__"];
  const out: string[] = [];
  while (out.length < count) {
    const which = Math.floor(random() * 5);
    const v = encodeURIComponent(bad[Math.floor(random() * bad.length)] as string);
    if (which === 0) out.push(`/api/runs?limit=${v}`);
    else if (which === 1) out.push(`/api/runs?status=${v}`);
    else if (which === 2) out.push(`/api/runs?cursor=${v}`);
    else if (which === 3) out.push(`/api/runs?foo${Math.floor(random() * 100)}=${v}`);
    else out.push(`/api/runs/x/events?after=${v === "0" ? "-3" : v}`);
  }
  return out;
}

describe("hostile input", () => {
  const h = useApiHarness();

  it("answers 400 invalid_request naming a field to a few hundred invalid bodies, storing nothing", async () => {
    const random = rng(20261122);
    const bodies = invalidBodies(300, random);
    for (const body of bodies) {
      const res = await h.request("POST", "/api/runs", body);
      expect(res.status, JSON.stringify(body).slice(0, 200)).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
      expect(Array.isArray(res.body.error.issues)).toBe(true);
      expect(typeof res.body.error.message).toBe("string");
    }
    expect((await h.repo.listRuns({ limit: 100 })).items).toHaveLength(0);
    expect((await h.inspect.getJobCounts()).waiting ?? 0).toBe(0);
  });

  it("answers 400 to invalid query strings, never a 5xx", async () => {
    const random = rng(7);
    for (const path of invalidQueries(200, random)) {
      const res = await h.request("GET", path);
      // An unknown run answers 404 only once its query is valid.
      expect([400, 404], path).toContain(res.status);
      if (path.includes("/api/runs?")) expect(res.status, path).toBe(400);
    }
  });

  it("limits each client's rate by default only beyond loopback; RATE_LIMIT_PER_MINUTE sets it anywhere", () => {
    expect(parseApiEnv({}).RATE_LIMIT_PER_MINUTE).toBe(0);
    expect(parseApiEnv({ HOST: "localhost" }).RATE_LIMIT_PER_MINUTE).toBe(0);
    // Every address of 127.0.0.0/8 is loopback, as the Host check (cross-site.ts) has it.
    expect(parseApiEnv({ HOST: "127.0.0.2" }).RATE_LIMIT_PER_MINUTE).toBe(0);
    expect(parseApiEnv({ HOST: "::1" }).RATE_LIMIT_PER_MINUTE).toBe(0);
    expect(parseApiEnv({ HOST: "0.0.0.0", API_TOKEN: "a-token" }).RATE_LIMIT_PER_MINUTE).toBe(1200);
    expect(parseApiEnv({ RATE_LIMIT_PER_MINUTE: "50" }).RATE_LIMIT_PER_MINUTE).toBe(50);
    expect(
      parseApiEnv({ HOST: "0.0.0.0", API_TOKEN: "a-token", RATE_LIMIT_PER_MINUTE: "0" })
        .RATE_LIMIT_PER_MINUTE,
    ).toBe(0);
    expect(() => parseApiEnv({ RATE_LIMIT_PER_MINUTE: "-1" })).toThrow(/RATE_LIMIT_PER_MINUTE/);
  });

  it("takes CORS_ORIGINS as origins a browser sends, and names a bad one", () => {
    expect(
      parseApiEnv({ CORS_ORIGINS: "https://app.example, http://127.0.0.1:5173" }).CORS_ORIGINS,
    ).toEqual(["https://app.example", "http://127.0.0.1:5173"]);
    expect(parseApiEnv({}).CORS_ORIGINS).toEqual([]);
    for (const bad of [
      "notaurl",
      "http://app.example/",
      "https://app.example/ui",
      "ftp://x.example",
      "https://App.example",
    ]) {
      expect(() => parseApiEnv({ CORS_ORIGINS: `https://ok.example,${bad}` }), bad).toThrow(
        /CORS_ORIGINS\.1: .* is not an origin/,
      );
    }
  });

  it("takes whole numbers as decimal digits only: an empty PORT is no port 0, nor 0x4A00 port 18944", () => {
    expect(parseApiEnv({ PORT: "18904" }).PORT).toBe(18904);
    expect(parseApiEnv({}).PORT).toBe(8787);
    for (const value of ["", " ", "0x4A00", "18904.0", "1e4", "-1", "65536", "80 "]) {
      expect(() => parseApiEnv({ PORT: value }), JSON.stringify(value)).toThrow(/PORT/);
    }
    expect(() => parseApiEnv({ LOOPRUN_SSE_POLL_MS: "" })).toThrow(
      /LOOPRUN_SSE_POLL_MS: must be a whole number \(decimal digits\)/,
    );
    expect(() => parseApiEnv({ DATABASE_POOL_SIZE: "1e1" })).toThrow(/DATABASE_POOL_SIZE/);
    for (const value of ["-1", "1.5", "ten", "3600001"]) {
      expect(() => parseApiEnv({ DATABASE_QUERY_TIMEOUT_MS: value }), value).toThrow(
        /DATABASE_QUERY_TIMEOUT_MS/,
      );
    }
    expect(parseApiEnv({}).DATABASE_QUERY_TIMEOUT_MS).toBe(10_000);
    expect(parseApiEnv({ DATABASE_QUERY_TIMEOUT_MS: "0" }).DATABASE_QUERY_TIMEOUT_MS).toBe(0);
  });

  it.each([
    ["WORKSPACES_ROOT", (file: string) => ({ WORKSPACES_ROOT: file })],
    ["WORKSPACES_ROOT", () => ({ WORKSPACES_ROOT: "/proc/looprun-nope/workspaces" })],
    ["DATABASE_PATH", () => ({ DATABASE_PATH: "/proc/looprun-nope/looprun.db" })],
  ])("stops at start-up, naming %s, on a directory it cannot make", (name, settings) => {
    const dir = mkdtempSync(join(tmpdir(), "looprun-bad-dir-"));
    try {
      const file = join(dir, "a-file");
      writeFileSync(file, "");
      const bin = join(__dirname, "../../cli/bin/looprun.js");
      const res = spawnSync(process.execPath, [bin, "api"], {
        env: {
          PATH: process.env.PATH,
          PORT: "0",
          DATABASE_PATH: join(dir, "looprun.db"),
          WORKSPACES_ROOT: join(dir, "workspaces"),
          REDIS_URL: "redis://127.0.0.1:1",
          ...settings(file),
        },
        encoding: "utf8",
        // A process stuck in a loop cannot run its SIGTERM handler.
        timeout: 30_000,
        killSignal: "SIGKILL",
      });
      // It ended by itself (a path under /proc made Node's recursive mkdir loop for ever).
      expect(res.signal).toBeNull();
      expect(res.status).not.toBe(0);
      expect(res.stderr).toContain(`${name}: cannot use`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("stops at start-up on a port in use, saying to set PORT", async () => {
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, "127.0.0.1", r));
    const port = (taken.address() as AddressInfo).port;
    const dir = mkdtempSync(join(tmpdir(), "looprun-port-"));
    try {
      const bin = join(__dirname, "../../cli/bin/looprun.js");
      const res = await new Promise<{ code: number | null; stderr: string }>((done) => {
        const child = spawn(process.execPath, [bin, "api"], {
          env: {
            PATH: process.env.PATH,
            PORT: String(port),
            DATABASE_PATH: join(dir, "looprun.db"),
            WORKSPACES_ROOT: join(dir, "workspaces"),
            REDIS_URL: "redis://127.0.0.1:1",
          },
        });
        let stderr = "";
        child.stderr.on("data", (chunk: Buffer) => {
          stderr += chunk.toString();
        });
        child.on("close", (code) => done({ code, stderr }));
      });
      expect(res.code).not.toBe(0);
      expect(res.stderr).toContain("EADDRINUSE");
      expect(res.stderr).toContain("set PORT to another port");
    } finally {
      taken.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses a non-loopback HOST without API_TOKEN, naming API_TOKEN", () => {
    expect(() => parseApiEnv({ HOST: "0.0.0.0" })).toThrow(/API_TOKEN/);
    expect(() => parseApiEnv({ HOST: "128.0.0.1" })).toThrow(/API_TOKEN/);
    expect(() => parseApiEnv({ HOST: "127.0.0.1.example.com" })).toThrow(/API_TOKEN/);
    expect(() => parseApiEnv({ HOST: "127.0.0.300" })).toThrow(/API_TOKEN/);
    expect(() => parseApiEnv({ HOST: "0.0.0.0", API_TOKEN: "a-long-enough-token" })).not.toThrow();
    // Empty is unset; a short token is taken (the API warns at start-up), down to the
    // shortest value the redactor keeps out of what is stored and logged.
    expect(() => parseApiEnv({ HOST: "0.0.0.0", API_TOKEN: "" })).toThrow(/API_TOKEN/);
    expect(parseApiEnv({ HOST: "0.0.0.0", API_TOKEN: "secret" }).API_TOKEN).toBe("secret");
    expect(() => parseApiEnv({ API_TOKEN: "abcde" })).toThrow(/API_TOKEN: must be at least 6/);
    expect(parseApiEnv({ API_TOKEN: "" }).API_TOKEN).toBeUndefined();
    // Whitespace around it (or a token of only whitespace) could never match a bearer token.
    for (const token of ["      ", " a-long-enough-token", "a-long-enough-token\n"]) {
      expect(() => parseApiEnv({ HOST: "0.0.0.0", API_TOKEN: token })).toThrow(
        /API_TOKEN: must not begin or end with whitespace/,
      );
    }
    const bin = join(__dirname, "../../cli/bin/looprun.js");
    const res = spawnSync(process.execPath, [bin, "api"], {
      env: { PATH: process.env.PATH, HOST: "0.0.0.0", PORT: "0" },
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(res.status).not.toBe(0);
    expect(res.stderr).toContain("API_TOKEN");
  });

  it("starts with a short API_TOKEN, warning that it is easy to guess (and not saying it)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "looprun-short-token-"));
    const bin = join(__dirname, "../../cli/bin/looprun.js");
    const api = spawn(process.execPath, [bin, "api"], {
      env: {
        PATH: process.env.PATH,
        PORT: "0",
        API_TOKEN: "sesame-42",
        DATABASE_PATH: join(dir, "looprun.db"),
        WORKSPACES_ROOT: join(dir, "workspaces"),
        REDIS_URL: "redis://127.0.0.1:1",
        LOG_LEVEL: "warn",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no warning in:\n${output}`)), 30_000);
        const read = (chunk: Buffer) => {
          output += chunk.toString();
          if (output.includes("API_TOKEN is shorter than 16 characters")) {
            clearTimeout(timer);
            resolve();
          }
        };
        api.stdout.on("data", read);
        api.stderr.on("data", read);
        api.once("exit", (code) => {
          clearTimeout(timer);
          reject(new Error(`the API exited (${code}):\n${output}`));
        });
      });
      expect(output).not.toContain("sesame-42");
    } finally {
      api.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
