import { Hono } from "hono";
import { buildOpenApiDocument } from "../openapi/document";

/** GET /api/openapi.json, built once from the zod schemas. */
export function openApiRoutes(): Hono {
  const app = new Hono();
  let document: Record<string, unknown> | null = null;
  app.get("/", (c) => {
    document ??= buildOpenApiDocument();
    return c.json(document);
  });
  return app;
}
