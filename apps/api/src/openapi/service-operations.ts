import { ConvergenceStatsQuery, ToolStatsQuery } from "../routes/stats";
import { bad, missing, type OperationDoc, unauthorized } from "./operation-doc";

/** Sessions, statistics, and the routes operators probe (health, metrics, this document). */
export const SERVICE_OPERATIONS: OperationDoc[] = [
  {
    method: "get",
    path: "/api/sessions/:id",
    summary: "A session and its runs",
    tag: "sessions",
    auth: "bearer",
    responses: {
      200: { description: "the session", json: "Session" },
      401: unauthorized,
      404: missing,
    },
  },
  {
    method: "get",
    path: "/api/stats",
    summary: "Convergence across the runs created in a time window",
    tag: "stats",
    auth: "bearer",
    query: ConvergenceStatsQuery,
    responses: {
      200: { description: "convergence statistics", json: "ConvergenceStats" },
      400: bad,
      401: unauthorized,
    },
  },
  {
    method: "get",
    path: "/api/stats/tools",
    summary: "Tool success rates, durations and common errors",
    tag: "stats",
    auth: "bearer",
    query: ToolStatsQuery,
    responses: {
      200: { description: "tool statistics", json: "ToolStats" },
      400: bad,
      401: unauthorized,
      404: missing,
    },
  },
  {
    method: "get",
    path: "/api/openapi.json",
    summary: "This document",
    tag: "ops",
    auth: "bearer",
    responses: { 200: { description: "the OpenAPI 3.1 document" }, 401: unauthorized },
  },
  {
    method: "get",
    path: "/metrics",
    summary: "Prometheus metrics (looprun_ prefix)",
    tag: "ops",
    auth: "bearer",
    responses: {
      200: { description: "Prometheus text format", media: "text/plain" },
      401: unauthorized,
    },
  },
  readiness("/healthz", "Health: Redis and the database (as /readyz)"),
  readiness("/readyz", "Readiness: Redis and the database"),
];

/** A probe of Redis and the database: 200 when both are up, 503 when one is down. */
function readiness(path: string, summary: string): OperationDoc {
  return {
    method: "get",
    path,
    summary,
    tag: "ops",
    auth: "none",
    responses: {
      200: { description: "both up", json: "Readiness" },
      503: { description: "one is down", json: "Readiness" },
    },
  };
}
