import { z } from "zod";
import {
  NAMED,
  OPERATIONS,
  type OperationDoc,
  REQUEST_BODIES,
  type ResponseDoc,
} from "./api-operations";

type JsonSchema = Record<string, unknown>;

const REF = (name: string) => `#/components/schemas/${name}`;

function jsonSchema(schema: z.ZodType, io: "input" | "output"): JsonSchema {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, {
    target: "draft-2020-12",
    io,
    unrepresentable: "any",
  }) as JsonSchema;
  return rest;
}

/** Response schemas as components, one registry so that a schema used inside another is a $ref. */
function responseComponents(): Record<string, JsonSchema> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(NAMED)) registry.add(schema, { id });
  const { schemas } = z.toJSONSchema(registry, {
    target: "draft-2020-12",
    io: "output",
    unrepresentable: "any",
    uri: REF,
    // Responses carry *at least* these fields: clients must not refuse one added later.
    override: (ctx) => {
      if (ctx.jsonSchema.additionalProperties === false) delete ctx.jsonSchema.additionalProperties;
    },
  }) as { schemas: Record<string, JsonSchema> };
  const out: Record<string, JsonSchema> = {};
  for (const [id, schema] of Object.entries(schemas)) {
    const { $schema: _drop, $id: _id, ...rest } = schema;
    out[id] = rest;
  }
  return out;
}

/** Hono's `/api/runs/:id` as OpenAPI's `/api/runs/{id}`. */
export const openApiPath = (path: string) => path.replace(/:([A-Za-z0-9_]+)/g, "{$1}");

/** A query parameter is required when the schema refuses its absence. */
const isRequired = (schema: z.ZodType) => !schema.safeParse(undefined).success;

function parameters(op: OperationDoc): JsonSchema[] {
  const params: JsonSchema[] = [];
  for (const [, name] of op.path.matchAll(/:([A-Za-z0-9_]+)/g)) {
    params.push({ name, in: "path", required: true, schema: { type: "string" } });
  }
  for (const [name, field] of Object.entries(op.query?.shape ?? {})) {
    const schema = field as z.ZodType;
    params.push({
      name,
      in: "query",
      required: isRequired(schema),
      schema: jsonSchema(schema, "input"),
    });
  }
  for (const h of op.headers ?? []) {
    params.push({
      name: h.name,
      in: "header",
      required: false,
      description: h.description,
      schema: { type: "string" },
    });
  }
  return params;
}

function response(doc: ResponseDoc): JsonSchema {
  if ("json" in doc) {
    return {
      description: doc.description,
      content: { "application/json": { schema: { $ref: REF(doc.json) } } },
    };
  }
  if ("media" in doc) {
    return {
      description: doc.description,
      content: { [doc.media]: { schema: { type: "string" } } },
    };
  }
  return { description: doc.description };
}

function operation(op: OperationDoc): JsonSchema {
  const params = parameters(op);
  return {
    operationId: `${op.method}${openApiPath(op.path).replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? "").toUpperCase())}`,
    summary: op.summary,
    tags: [op.tag],
    ...(op.auth === "bearer" ? { security: [{ bearerToken: [] }] } : {}),
    ...(op.auth === "cookie" ? { security: [{ dashboardCookie: [] }] } : {}),
    ...(params.length > 0 ? { parameters: params } : {}),
    ...(op.body
      ? {
          requestBody: {
            required: op.bodyOptional !== true,
            content: { "application/json": { schema: { $ref: REF(op.body) } } },
          },
        }
      : {}),
    responses: Object.fromEntries(
      Object.entries({
        // Any /api route reads the database; an operation's own 503 (Redis down) says more.
        ...(op.path.startsWith("/api/") ? { 503: DATABASE_DOWN } : {}),
        ...op.responses,
        // RATE_LIMIT_PER_MINUTE covers every /api route, the cross-site check and the body's
        // size limit every /api POST (see app.ts).
        ...(op.path.startsWith("/api/") && op.method === "post"
          ? { 403: CROSS_SITE, 413: TOO_LARGE }
          : {}),
        ...(op.path.startsWith("/api/") ? { 429: RATE_LIMITED } : {}),
      }).map(([status, doc]) => [status, response(doc)]),
    ),
  };
}

const TOO_LARGE: ResponseDoc = {
  description: "payload_too_large: the body is over the limit (1 MiB)",
  json: "Error",
};

const CROSS_SITE: ResponseDoc = {
  description:
    "forbidden: sent by a browser from a page of another origin than the API's own and CORS_ORIGINS (cross-site request forgery)",
  json: "Error",
};

const DATABASE_DOWN: ResponseDoc = {
  description:
    "unavailable: the database cannot be reached for now (PostgreSQL restarting, a connection cut); try again later",
  json: "Error",
};

const RATE_LIMITED: ResponseDoc = {
  description:
    "rate_limited: over RATE_LIMIT_PER_MINUTE requests from this client (`Retry-After` says when to try again)",
  json: "Error",
};

/** The OpenAPI 3.1 document, generated from the zod schemas that validate requests and describe responses. */
export function buildOpenApiDocument(version = "0.1.0"): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const op of OPERATIONS) {
    const path = openApiPath(op.path);
    paths[path] ??= {};
    paths[path][op.method] = operation(op);
  }
  const requestSchemas = Object.fromEntries(
    Object.entries(REQUEST_BODIES).map(([name, schema]) => [name, jsonSchema(schema, "input")]),
  );
  return {
    openapi: "3.1.0",
    info: {
      title: "looprun API",
      version,
      description:
        "Self-correcting agent loops as durable jobs. When API_TOKEN is set, /api/* and /metrics take `Authorization: Bearer <token>` and the dashboard pages a cookie set by POST /login.",
    },
    paths,
    components: {
      schemas: { ...responseComponents(), ...requestSchemas },
      securitySchemes: {
        bearerToken: {
          type: "http",
          scheme: "bearer",
          description: "the API_TOKEN (only when it is set)",
        },
        dashboardCookie: { type: "apiKey", in: "cookie", name: "looprun_dashboard" },
      },
    },
  };
}
