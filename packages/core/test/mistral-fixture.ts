import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MistralChatModel } from "@looprun/core";
import { afterAll, beforeAll, beforeEach } from "vitest";
import { FakeMistral, type ReceivedRequest } from "../../../tests/support/fake-mistral";
import { makeRun, removeDir, tempDir } from "./support";

// The mistral agent's tests: the real SDK against the fake Mistral, a workspace with a bug.

export const API_KEY = "mistral-secret-key-0123456789";
/** The reference MCP server (stdio), as a run would add it. */
export const SERVER_EVERYTHING = join(
  process.cwd(),
  "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
);

/** The tool results the request carries, oldest first. */
export function toolResults(req: ReceivedRequest): string[] {
  return req.messages.filter((m) => m.role === "tool").map((m) => String(m.content));
}

export interface MistralFixture {
  fake: FakeMistral;
  /** The model client (set before the first test). */
  llm: MistralChatModel;
  /** This test's temporary directory, and the workspace in it with `bug.txt` saying broken. */
  dir: string;
  workspace: string;
  /** A mistral run on the workspace: fix bug.txt, checked by grep. */
  run(extra?: Record<string, unknown>, opts?: { sessionId?: string }): ReturnType<typeof makeRun>;
}

/** Registers the hooks of a describe block: one fake for the block, a fresh workspace per test. */
export function mistralFixture(): MistralFixture {
  const fx: MistralFixture = {
    fake: new FakeMistral(),
    llm: undefined as unknown as MistralChatModel,
    dir: "",
    workspace: "",
    run: (extra = {}, opts = {}) =>
      makeRun(
        {
          task: "Fix bug.txt so that it says fixed",
          agent: { type: "mistral", model: "mistral-small-latest" },
          testCommand: "grep -q fixed bug.txt",
          cooldownMs: 0,
          ...extra,
        },
        fx.workspace,
        opts,
      ),
  };
  beforeAll(async () => {
    await fx.fake.start();
    fx.llm = new MistralChatModel({
      apiKey: API_KEY,
      serverURL: fx.fake.url,
      timeoutMs: 20_000,
      retry: { initialIntervalMs: 10, maxIntervalMs: 100, maxElapsedMs: 5000 },
    });
  });
  afterAll(() => fx.fake.stop());
  beforeEach(async () => {
    fx.fake.reset();
    const dir = await tempDir();
    fx.dir = dir;
    fx.workspace = join(dir, "ws");
    mkdirSync(fx.workspace);
    writeFileSync(join(fx.workspace, "bug.txt"), "broken\n");
    return () => removeDir(dir);
  });
  return fx;
}
