import { compileErrors, validate } from "@readme/openapi-parser";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { beforeAll, describe, expect, it } from "vitest";
import type { z } from "zod";
import { NAMED } from "../src/openapi/api-operations";
import { openApiPath } from "../src/openapi/document";
import * as R from "../src/openapi/response-schemas";
import { useApiHarness } from "./api-harness";

type Doc = {
  openapi: string;
  paths: Record<
    string,
    Record<
      string,
      {
        responses: Record<string, unknown>;
        parameters?: { name: string; in: string; required?: boolean; schema?: unknown }[];
      }
    >
  >;
  components: { schemas: Record<string, { required?: string[]; additionalProperties?: unknown }> };
};

describe("GET /api/openapi.json", () => {
  const h = useApiHarness();
  let doc: Doc;
  beforeAll(async () => {
    const res = await h.request("GET", "/api/openapi.json");
    expect(res.status).toBe(200);
    doc = res.body;
  });

  it("is a valid OpenAPI 3.1 document", async () => {
    expect(doc.openapi).toBe("3.1.0");
    // validate() dereferences in place: give it a copy.
    const result = await validate(structuredClone(doc) as never);
    expect(result.valid, result.valid ? "" : compileErrors(result)).toBe(true);
  });

  it("documents every route the app registers, and nothing else", () => {
    const registered = new Set(
      h.app.routes
        .filter((r) => r.method !== "ALL")
        .map((r) => `${r.method.toLowerCase()} ${openApiPath(r.path)}`),
    );
    const documented = new Set(
      Object.entries(doc.paths).flatMap(([path, ops]) =>
        Object.keys(ops).map((method) => `${method} ${path}`),
      ),
    );
    expect(
      [...registered].filter((r) => !documented.has(r)),
      "registered but not documented",
    ).toEqual([]);
    expect(
      [...documented].filter((d) => !registered.has(d)),
      "documented but not registered",
    ).toEqual([]);
  });

  it("lists the error statuses the API answers: the submit's, 429 on every /api route, 403 and 413 on every /api POST", () => {
    expect(Object.keys(doc.paths["/api/runs"]?.post?.responses ?? {}).sort()).toEqual([
      "202",
      "400",
      "401",
      "403",
      "409",
      "413",
      "422",
      "429",
      "503",
    ]);
    // The dashboard's: a run page for an unknown id, a sign-in with no token to ask for.
    expect(Object.keys(doc.paths["/runs/{id}"]?.get?.responses ?? {}).sort()).toEqual([
      "200",
      "302",
      "404",
    ]);
    expect(Object.keys(doc.paths["/login"]?.get?.responses ?? {}).sort()).toEqual(["200", "302"]);
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        expect(op.responses["429"] !== undefined, `${method} ${path}`).toBe(
          path.startsWith("/api/"),
        );
        expect(op.responses["403"] !== undefined, `${method} ${path}`).toBe(
          path.startsWith("/api/") && method === "post",
        );
        expect(op.responses["413"] !== undefined, `${method} ${path}`).toBe(
          path.startsWith("/api/") && method === "post",
        );
      }
    }
  });

  it("takes the request schemas from the zod schemas that validate requests", () => {
    const submission = doc.components.schemas.RunSubmission;
    expect(submission?.required).toEqual(expect.arrayContaining(["task", "agent"]));
    expect(submission?.additionalProperties).toBe(false);
    const list = doc.paths["/api/runs"]?.get?.parameters?.map((p) => `${p.in}:${p.name}`);
    expect(list).toEqual(["query:sessionId", "query:status", "query:limit", "query:cursor"]);
    const limit = doc.paths["/api/runs"]?.get?.parameters?.find((p) => p.name === "limit");
    expect(limit?.schema).toMatchObject({ type: "integer", minimum: 1, maximum: 100, default: 20 });
    const stream = doc.paths["/api/runs/{id}/events/stream"]?.get;
    expect(stream?.parameters?.map((p) => `${p.in}:${p.name}`)).toEqual([
      "path:id",
      "query:after",
      "header:Last-Event-ID",
    ]);
    expect(stream?.responses["200"]).toMatchObject({ content: { "text/event-stream": {} } });
    // The submit's optional header, beside the 422 it can bring.
    expect(
      doc.paths["/api/runs"]?.post?.parameters?.map(
        (p) => `${p.in}:${p.name}:${p.required ?? false}`,
      ),
    ).toEqual(["header:Idempotency-Key:false"]);
    // A finished run's stream, reconnected to after its end: what stops an EventSource.
    expect(stream?.responses["204"]).toMatchObject({
      description: expect.stringContaining("finished"),
    });
    expect(doc.paths["/api/runs/stream"]?.get?.responses["200"]).toMatchObject({
      content: { "text/event-stream": {} },
    });
  });

  it("describes what the API really answers (real responses parse with the response schemas, and no field is left out)", async () => {
    // The document itself, as a client generated from it reads it (JSON Schema 2020-12, formats
    // checked): what the zod schemas accept, its schemas must accept too.
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats.default(ajv);
    ajv.addSchema({ $id: "doc", components: doc.components });
    const byDocument = (name: string, body: unknown, what: string) => {
      const check = ajv.getSchema(`doc#/components/schemas/${name}`);
      expect(check, `${what}: no schema ${name} in the document`).toBeDefined();
      expect(check?.(body), `${what}: ${ajv.errorsText(check?.errors)}`).toBe(true);
    };
    const strictParse = (schema: z.ZodType, body: unknown, what: string) => {
      const parsed = schema.safeParse(body);
      expect(parsed.success, `${what}: ${JSON.stringify(parsed.error?.issues)}`).toBe(true);
      // Parsing drops the fields a schema does not name: what is left is the whole answer.
      expect(parsed.data, `${what}: fields the document does not describe`).toEqual(body);
      const name = Object.entries(NAMED).find(([, named]) => named === schema)?.[0];
      expect(name, `${what}: a schema the document does not name`).toBeDefined();
      byDocument(name as string, body, what);
    };
    // An MCP server's url and headers may name variables of the workers (`${NAME}`).
    const submission = {
      task: "doc",
      sessionId: "openapi-1",
      agent: { type: "mistral" },
      testCommand: "true",
      mcpServers: [
        { name: "docs", url: `http://127.0.0.1:1/p/\${DOCS_PATH}?q=\${DOCS_KEY}`, headers: {} },
        { name: "gh", command: "gh-mcp", args: ["--token-env", "GH"], env: { GH: `\${GH_PAT}` } },
      ],
    };
    byDocument("RunSubmission", submission, "the submitted body");
    const created = await h.request("POST", "/api/runs", submission);
    strictParse(R.RunAccepted, created.body, "POST /api/runs");
    const id = created.body.id as string;
    const store = h.store;
    const claimed = await store.claimRun(id);
    const now = Date.now();
    await store.commit(
      id,
      claimed?.run.epoch ?? 0,
      {
        run: { status: "running", startedAt: now, iteration: 1 },
        insertIteration: {
          runId: id,
          n: 1,
          attempt: 1,
          status: "running",
          outcome: null,
          prompt: "p",
          agent: { exitCode: 0, output: "ok", durationMs: 5 },
          validation: [{ command: "true", exitCode: 0, durationMs: 1, output: "" }],
          reviewId: null,
          feedback: null,
          startedAt: now,
          finishedAt: null,
        },
        toolCalls: [
          {
            iteration: 1,
            server: "workspace",
            tool: "read_text_file",
            args: { path: "a" },
            isError: false,
            result: "x",
            durationMs: 3,
          },
        ],
        events: [
          { type: "run_started", data: { budget: { elapsedMs: 0, remainingIterations: 6 } } },
        ],
      },
      now,
    );
    strictParse(R.RunDetail, (await h.request("GET", `/api/runs/${id}`)).body, "GET /api/runs/:id");
    strictParse(R.RunList, (await h.request("GET", "/api/runs")).body, "GET /api/runs");
    strictParse(
      R.IterationList,
      (await h.request("GET", `/api/runs/${id}/iterations`)).body,
      "iterations",
    );
    strictParse(
      R.ToolCallList,
      (await h.request("GET", `/api/runs/${id}/tool-calls`)).body,
      "tool-calls",
    );
    strictParse(R.ReviewList, (await h.request("GET", `/api/runs/${id}/reviews`)).body, "reviews");
    strictParse(R.EventList, (await h.request("GET", `/api/runs/${id}/events`)).body, "events");
    strictParse(R.SessionView, (await h.request("GET", "/api/sessions/openapi-1")).body, "session");
    strictParse(R.ToolStatsView, (await h.request("GET", "/api/stats/tools")).body, "tool stats");
    strictParse(R.ConvergenceStatsView, (await h.request("GET", "/api/stats")).body, "stats");
    strictParse(
      R.ArtifactList,
      (await h.request("GET", `/api/runs/${id}/artifacts`)).body,
      "artifacts",
    );
    strictParse(R.StopAccepted, (await h.request("POST", `/api/runs/${id}/stop`)).body, "stop");
    strictParse(R.ErrorBody, (await h.request("GET", "/api/runs/nope")).body, "404");
    strictParse(R.ErrorBody, (await h.request("POST", "/api/runs", { task: "" })).body, "400");
    strictParse(R.Readiness, (await h.request("GET", "/healthz")).body, "healthz");
    strictParse(R.Readiness, (await h.request("GET", "/readyz")).body, "readyz");
  });
});
