import { createServer, request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { cliEnvFor, runCli, type Stack, startStack, submittedId, useStack } from "./support/stack";

// How the CLI reaches the API: a token, nothing listening, LOOPRUN_URL's forms, a path prefix.
// The commands themselves: e2e-cli.test.ts.

const stack = useStack(() => ({ redisUrl: inject("redisUrl") }));
const cliEnv = () => cliEnvFor(stack.url);

describe("looprun CLI reaching the API", () => {
  describe("with an API that wants a token", () => {
    let guarded: Stack;
    const token = "cli-e2e-token-0123456789abcdef";

    beforeAll(async () => {
      guarded = await startStack({
        redisUrl: inject("redisUrl"),
        workers: 0,
        env: { API_TOKEN: token },
      });
    });

    afterAll(async () => {
      await guarded?.stop();
    });

    it("a 401 says to set API_TOKEN; with it, the command goes through", async () => {
      const env = { ...cliEnv(), LOOPRUN_URL: guarded.url };
      const without = await runCli(["ls"], env);
      expect(without.code).toBe(1);
      expect(without.output).toContain("401 unauthorized");
      expect(without.output).toContain("set API_TOKEN to the API's token");
      const wrong = await runCli(["ls"], { ...env, API_TOKEN: `${token}-not` });
      expect(wrong.code).toBe(1);
      expect(wrong.output).toContain("API_TOKEN is set, but the API does not take it");
      const right = await runCli(["ls"], { ...env, API_TOKEN: token });
      expect(right.code, right.output).toBe(0);
    });
  });

  it("says where it tried to reach the API when nothing listens, and why it could not", async () => {
    // A port just given back: nothing listens there.
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as AddressInfo;
        probe.close(() => resolve(port));
      });
    });
    const url = `http://127.0.0.1:${port}`;
    for (const args of [["ls"], ["watch", "01M8815E5VZX91Z5B2J4P53JY7"]]) {
      const { code, output } = await runCli(args, { ...cliEnv(), LOOPRUN_URL: url });
      expect(code, output).toBe(1);
      expect(output).toContain(
        `cannot reach the looprun API at ${url} (connection refused (ECONNREFUSED))`,
      );
    }
  });

  it("gives up on an API that does not answer, after LOOPRUN_CLI_TIMEOUT_MS, saying so", async () => {
    // Takes the connection and never answers (a hung server, or no HTTP server at all).
    const silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    try {
      const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
      const { code, output } = await runCli(["ls"], {
        ...cliEnv(),
        LOOPRUN_URL: url,
        LOOPRUN_CLI_TIMEOUT_MS: "500",
      });
      expect(code, output).toBe(1);
      expect(output).toContain(
        `the looprun API at ${url} did not answer GET /api/runs within 500 ms (LOOPRUN_CLI_TIMEOUT_MS)`,
      );
      const bad = await runCli(["ls"], { ...cliEnv(), LOOPRUN_CLI_TIMEOUT_MS: "soon" });
      expect(bad.code, bad.output).toBe(1);
      expect(bad.output).toContain(
        'LOOPRUN_CLI_TIMEOUT_MS must be a whole number of milliseconds from 1 to 2147483647, not "soon"',
      );
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  it("says that TLS failed, not OpenSSL's internals, for an https URL of the http API", async () => {
    const url = stack.url.replace("http://", "https://");
    const { code, output } = await runCli(["ls"], { ...cliEnv(), LOOPRUN_URL: url });
    expect(code, output).toBe(1);
    expect(output).toMatch(
      /cannot reach the looprun API at https:\/\/\S+ \(TLS failed: is the API served over http\? \(ERR_SSL_[A-Z_]+\)\)/,
    );
    expect(output).not.toContain("SSL routines");
  });

  it("refuses a LOOPRUN_URL that is no http(s) URL, naming it", async () => {
    for (const value of [
      "127.0.0.1:8787",
      "ftp://127.0.0.1/",
      "http://127.0.0.1:8787/?x=1",
      "http://127.0.0.1:8787/?",
      "http://127.0.0.1:8787/#",
    ]) {
      const { code, output } = await runCli(["ls"], { ...cliEnv(), LOOPRUN_URL: value });
      expect(code, output).toBe(1);
      expect(output).toMatch(/^looprun: LOOPRUN_URL must/m);
      expect(output).toContain(JSON.stringify(value));
    }
    // A password in it is refused without being echoed.
    const withPassword = stack.url.replace("http://", "http://me:hunter2-secret@");
    const refused = await runCli(["ls"], { ...cliEnv(), LOOPRUN_URL: withPassword });
    expect(refused.code, refused.output).toBe(1);
    expect(refused.output).toContain("LOOPRUN_URL must not carry a user or a password");
    expect(refused.output).not.toContain("hunter2-secret");
  });

  it("refuses an API_TOKEN with whitespace around it, which the API could never match", async () => {
    const { code, output } = await runCli(["ls"], {
      ...cliEnv(),
      API_TOKEN: " a-token-of-some-length ",
    });
    expect(code, output).toBe(1);
    expect(output).toMatch(/^looprun: API_TOKEN must not begin or end with whitespace/m);
    expect(output).not.toContain("a-token-of-some-length");
  });

  it("takes the API's URL as `looprun dev` prints it (ending in /api)", async () => {
    for (const suffix of ["/api", "/api/"]) {
      const { code, output } = await runCli(["ls", "-n", "1"], {
        ...cliEnv(),
        LOOPRUN_URL: `${stack.url}${suffix}`,
      });
      expect(code, output).toBe(0);
      expect(output).not.toContain("no route");
    }
  });

  it("reaches an API behind a path prefix (LOOPRUN_URL keeps its path)", async () => {
    // A reverse proxy that serves the API under /looprun/ and nothing elsewhere.
    const proxy = createServer((req, res) => {
      if (!req.url?.startsWith("/looprun/")) {
        res.writeHead(404).end("not under the prefix");
        return;
      }
      const upstream = httpRequest(
        `${stack.url}${req.url.slice("/looprun".length)}`,
        { method: req.method, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      req.pipe(upstream);
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = proxy.address() as AddressInfo;
      const env = { ...cliEnv(), LOOPRUN_URL: `http://127.0.0.1:${port}/looprun/` };
      const submitted = await runCli(
        [
          "submit",
          "--task",
          "behind a proxy",
          "--agent",
          "true",
          "--test",
          "true",
          "--cooldown",
          "0",
          "--watch",
        ],
        env,
      );
      expect(submitted.code, submitted.output).toBe(0);
      const { id } = submittedId(submitted.output);
      expect(submitted.output).toContain("finished: succeeded (success)");
      const shown = await runCli(["show", id], env);
      expect(shown.code, shown.output).toBe(0);
      expect(JSON.parse(shown.output)).toMatchObject({ id, task: "behind a proxy" });
    } finally {
      proxy.closeAllConnections();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
  });
});
