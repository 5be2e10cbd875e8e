import { mkdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import type { Hono } from "hono";
import { describe, expect, it } from "vitest";
import * as R from "../src/openapi/response-schemas";
import { ENGINES, useApiHarness } from "./api-harness";

describe.each(ENGINES)("GET /api/stats/tools: learned patterns on %s", (engine) => {
  const h = useApiHarness(engine, {}, { each: true });

  /** A run in `workspace` whose worker recorded a failing tool call and a decided iteration. */
  async function learnedRun(workspace: string, request = h.request) {
    const submitted = await request("POST", "/api/runs", {
      task: "fix the cart",
      workspace,
      agent: { type: "command", command: "true" },
      testCommand: "npm test",
      validationCommands: ["npm run lint"],
    });
    expect(submitted.status).toBe(202);
    const id: string = submitted.body.id;
    const store = h.store;
    const { run } = (await store.claimRun(id))!;
    const call = (isError: boolean, result: string) => ({
      iteration: 1,
      server: "workspace",
      tool: "run_command",
      args: { command: "npm test" },
      isError,
      result,
      durationMs: 30,
    });
    await store.commit(
      id,
      run.epoch,
      { toolCalls: [call(true, "exit 1"), call(false, "ok")] },
      Date.now(),
    );
    await store.commit(
      id,
      run.epoch,
      {
        insertIteration: {
          runId: id,
          n: 1,
          attempt: 1,
          status: "running",
          outcome: null,
          prompt: "p",
          agent: null,
          validation: [],
          reviewId: null,
          feedback: null,
          startedAt: Date.now(),
          finishedAt: null,
        },
      },
      Date.now(),
    );
    await store.commit(
      id,
      run.epoch,
      {
        updateIteration: {
          n: 1,
          attempt: 1,
          patch: {
            status: "failed",
            outcome: "validation_failed",
            validation: [
              { command: "npm test", exitCode: 1, durationMs: 100, output: "2 failing" },
              { command: "npm run lint", exitCode: 0, durationMs: 20, output: "" },
            ],
          },
        },
      },
      Date.now(),
    );
    return id;
  }

  it("lists what runs learned, filtered by workspace and scope", async () => {
    const id = await learnedRun("shop");
    await learnedRun("other");

    const all = await h.request("GET", "/api/stats/tools");
    expect(all.status).toBe(200);
    R.ToolStatsView.parse(all.body);
    expect(all.body.patterns).toHaveLength(6);

    const shop = await h.request("GET", "/api/stats/tools?workspace=shop&scope=command");
    expect(shop.status).toBe(200);
    expect(shop.body.patterns).toEqual([
      {
        scope: "command",
        workspace: `${h.workspacesRoot}/shop`,
        subject: "npm test",
        shape: "",
        successes: 0,
        failures: 1,
        meanDurationMs: 100,
        lastErrors: ["exit 1: 2 failing"],
        lastRunId: id,
        lastSeenAt: expect.any(String),
      },
      expect.objectContaining({ subject: "npm run lint", successes: 1, failures: 0 }),
    ]);
    const tools = await h.request("GET", "/api/stats/tools?workspace=shop&scope=tool");
    expect(tools.body.patterns).toEqual([
      expect.objectContaining({
        subject: "workspace.run_command",
        shape: "$ npm test",
        successes: 1,
        failures: 1,
        meanDurationMs: 30,
        lastErrors: ["exit 1"],
      }),
    ]);
    expect((await h.request("GET", "/api/stats/tools?patterns=1")).body.patterns).toHaveLength(1);
  });

  it("filters by workspace when WORKSPACES_ROOT is reached through a symlink", async () => {
    // Runs store their workspace's real path; the filter is resolved the same way.
    const real = join(h.workspacesRoot, "..", "real-root");
    const link = join(h.workspacesRoot, "..", "link-root");
    mkdirSync(real);
    symlinkSync(real, link);
    const app = h.appWith({ workspacesRoot: link });
    const request = (method: string, path: string, body?: unknown) => call(app, method, path, body);
    await learnedRun("shop", request);
    await learnedRun("other", request);

    for (const workspace of ["shop", encodeURIComponent(join(link, "shop"))]) {
      const res = await request("GET", `/api/stats/tools?workspace=${workspace}&scope=command`);
      expect(res.status).toBe(200);
      expect(res.body.patterns.map((p: { subject: string }) => p.subject)).toEqual([
        "npm test",
        "npm run lint",
      ]);
      expect(res.body.patterns[0].workspace).toBe(join(real, "shop"));
    }
  });

  it("refuses a bad filter, naming it", async () => {
    for (const [query, path] of [
      ["scope=files", "scope"],
      ["patterns=101", "patterns"],
      ["workspace=", "workspace"],
    ]) {
      const res = await h.request("GET", `/api/stats/tools?${query}`);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
      expect(res.body.error.issues.map((i: { path: string }) => i.path)).toContain(path);
    }
  });
});

async function call(app: Hono, method: string, path: string, body?: unknown) {
  const res = await app.request(path, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  // biome-ignore lint/suspicious/noExplicitAny: test responses are checked field by field
  return { status: res.status, body: (await res.json()) as any };
}
