import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { runStep } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { describe, expect, it } from "vitest";
import { finish } from "../../../tests/support/fake-mistral";
import { mistralFixture } from "./mistral-fixture";
import { isAlive, resources, waitFor } from "./support";

// A run's MCP server that starts but never answers (stuck downloading, say): the start-up may
// take up to a minute, and a stop or the run's deadline must not wait for it.
const HANGS =
  "require('fs').writeFileSync(process.argv[1], String(process.pid)); setInterval(() => {}, 1000)";

describe("the mistral agent while its tool servers start", () => {
  const fx = mistralFixture();

  const hangingRun = (extra: Record<string, unknown> = {}) => {
    const pidFile = join(fx.dir, "hangs.pid");
    const run = fx.run({
      mcpServers: [{ name: "hangs", command: process.execPath, args: ["-e", HANGS, pidFile] }],
      ...extra,
    });
    const pid = async () => {
      await waitFor(
        () => existsSync(pidFile) && readFileSync(pidFile, "utf8") !== "",
        "the server to start",
      );
      return Number(readFileSync(pidFile, "utf8"));
    };
    return { run, pid };
  };

  it("is stopped at once by a stop, and stops the server", { timeout: 30_000 }, async () => {
    fx.fake.replies(finish("x"));
    const store = new MemoryRunStore();
    const { run, pid } = hangingRun();
    store.add(run);
    const stop = new AbortController();
    const step = runStep(resources(store, { llm: fx.llm }), run.id, { stop: stop.signal });
    const server = await pid();
    stop.abort();
    expect(await step).toMatchObject({ kind: "finished", status: "stopped" });
    expect(fx.fake.requests).toHaveLength(0);
    await waitFor(() => !isAlive(server), "the server to be stopped");
  });

  it("ends at the run's deadline, not the start-up's minute", { timeout: 30_000 }, async () => {
    fx.fake.replies(finish("x"));
    const store = new MemoryRunStore();
    // 3 s to the deadline.
    const { run, pid } = hangingRun({ maxMinutes: 0.05 });
    store.add(run);
    const result = await runStep(resources(store, { llm: fx.llm }), run.id);
    expect(result).toMatchObject({ kind: "finished", status: "failed", reason: "max_minutes" });
    expect(fx.fake.requests).toHaveLength(0);
    const server = await pid();
    await waitFor(() => !isAlive(server), "the server to be stopped");
  });
});
