import { RunSubmission } from "@looprun/core";
import type { z } from "zod";
import { ApproveBody, RejectBody, ReplyBody } from "../routes/approval";
import { EventsStreamQuery, RunsStreamQuery } from "../routes/events-stream";
import { RollbackBody } from "../routes/rollback";
import { ListEventsQuery, ListRunsQuery } from "../routes/runs";
import { ConvergenceStatsQuery, ToolStatsQuery } from "../routes/stats";
import * as R from "./response-schemas";

/** A response: JSON with a named schema, or another media type described in words. */
export type ResponseDoc =
  | { description: string; json: keyof typeof NAMED }
  | {
      description: string;
      media:
        | "text/event-stream"
        | "text/html"
        | "text/plain"
        | "application/javascript"
        | "text/css";
    }
  | { description: string };

export interface OperationDoc {
  method: "get" | "post";
  /** Hono's form (`/api/runs/:id`). */
  path: string;
  summary: string;
  tag: "runs" | "live" | "sessions" | "stats" | "ops" | "dashboard";
  /** Which credentials the route takes when API_TOKEN is set. */
  auth: "bearer" | "cookie" | "none";
  query?: z.ZodObject;
  headers?: { name: string; description: string }[];
  body?: keyof typeof REQUEST_BODIES;
  /** The body may be left out (an empty body). @defaultValue false */
  bodyOptional?: boolean;
  responses: Record<number, ResponseDoc>;
}

/** The schemas the document names (components), response bodies and the request body. */
export const NAMED = {
  Error: R.ErrorBody,
  Run: R.RunView,
  RunDetail: R.RunDetail,
  RunList: R.RunList,
  RunAccepted: R.RunAccepted,
  StopAccepted: R.StopAccepted,
  RollbackApplied: R.RollbackApplied,
  ApprovalAccepted: R.ApprovalAccepted,
  ApprovalRejected: R.ApprovalRejected,
  Iteration: R.IterationView,
  IterationList: R.IterationList,
  Event: R.EventView,
  EventList: R.EventList,
  ToolCall: R.ToolCallView,
  ToolCallList: R.ToolCallList,
  Review: R.ReviewView,
  ReviewList: R.ReviewList,
  Session: R.SessionView,
  ToolStats: R.ToolStatsView,
  ConvergenceStats: R.ConvergenceStatsView,
  ArtifactList: R.ArtifactList,
  Readiness: R.Readiness,
} as const;

export const REQUEST_BODIES = {
  RunSubmission,
  RollbackBody,
  ApproveBody,
  RejectBody,
  ReplyBody,
} as const;

const err = (description: string): ResponseDoc => ({ description, json: "Error" });
const bad = err("invalid_request: a parameter is invalid (`issues` names it)");
const missing = err("not_found");
const unauthorized = err("unauthorized: API_TOKEN is set and the bearer token is missing or wrong");

const sse = (description: string): ResponseDoc => ({ description, media: "text/event-stream" });

/** Every route of the app. A test checks this list against the routes the app registers. */
export const OPERATIONS: OperationDoc[] = [
  {
    method: "post",
    path: "/api/runs",
    summary: "Submit a run",
    tag: "runs",
    auth: "bearer",
    body: "RunSubmission",
    responses: {
      202: { description: "accepted and queued", json: "RunAccepted" },
      400: bad,
      401: unauthorized,
      409: err("run_already_active: the session has an active run (`activeRunId`)"),
      413: err("payload_too_large"),
      422: err("idempotency_conflict: the Idempotency-Key came before with another body"),
      503: err("unavailable: the queue (Redis) is down"),
    },
  },
  {
    method: "get",
    path: "/api/runs",
    summary: "List runs, newest first",
    tag: "runs",
    auth: "bearer",
    query: ListRunsQuery,
    responses: {
      200: { description: "a page of runs", json: "RunList" },
      400: bad,
      401: unauthorized,
    },
  },
  {
    method: "get",
    path: "/api/runs/stream",
    summary: "Every run's changes, live (server-sent events)",
    tag: "live",
    auth: "bearer",
    query: RunsStreamQuery,
    responses: {
      200: sse(
        "`event: run_updated` with the run (as in GET /api/runs) in `data` whenever its status, iteration, progress or metrics change; `: ping` comments while idle",
      ),
      400: bad,
      401: unauthorized,
    },
  },
  {
    method: "get",
    path: "/api/runs/:id",
    summary: "A run",
    tag: "runs",
    auth: "bearer",
    responses: {
      200: { description: "the run", json: "RunDetail" },
      401: unauthorized,
      404: missing,
    },
  },
  {
    method: "get",
    path: "/api/runs/:id/iterations",
    summary: "A run's iterations",
    tag: "runs",
    auth: "bearer",
    responses: {
      200: { description: "iterations", json: "IterationList" },
      401: unauthorized,
      404: missing,
    },
  },
  {
    method: "get",
    path: "/api/runs/:id/tool-calls",
    summary: "A run's MCP tool calls",
    tag: "runs",
    auth: "bearer",
    responses: {
      200: { description: "tool calls", json: "ToolCallList" },
      401: unauthorized,
      404: missing,
    },
  },
  {
    method: "get",
    path: "/api/runs/:id/reviews",
    summary: "A run's review artifacts",
    tag: "runs",
    auth: "bearer",
    responses: {
      200: { description: "reviews", json: "ReviewList" },
      401: unauthorized,
      404: missing,
    },
  },
  {
    method: "get",
    path: "/api/runs/:id/iterations/:n/diff",
    summary: "An iteration's diff (against the snapshot before it)",
    tag: "runs",
    auth: "bearer",
    responses: {
      200: { description: "a unified diff", media: "text/plain" },
      401: unauthorized,
      404: err("not_found: no such run, or no snapshot of that iteration (yet)"),
    },
  },
  {
    method: "get",
    path: "/api/runs/:id/patch",
    summary: "The run's whole change (baseline → latest snapshot)",
    tag: "runs",
    auth: "bearer",
    responses: {
      200: { description: "a patch `git apply` takes", media: "text/plain" },
      401: unauthorized,
      404: err("not_found: no such run, or no snapshot yet"),
    },
  },
  {
    method: "get",
    path: "/api/runs/:id/artifacts",
    summary: "A run's phase artifacts and its change",
    tag: "runs",
    auth: "bearer",
    responses: {
      200: { description: "artifacts", json: "ArtifactList" },
      401: unauthorized,
      404: missing,
    },
  },
  {
    method: "get",
    path: "/api/runs/:id/events",
    summary: "A run's events (a page)",
    tag: "runs",
    auth: "bearer",
    query: ListEventsQuery,
    responses: {
      200: { description: "events", json: "EventList" },
      400: bad,
      401: unauthorized,
      404: missing,
    },
  },
  {
    method: "get",
    path: "/api/runs/:id/events/stream",
    summary: "A run's events, live (server-sent events)",
    tag: "live",
    auth: "bearer",
    query: EventsStreamQuery,
    headers: [{ name: "Last-Event-ID", description: "resume after this seq (wins over `after`)" }],
    responses: {
      200: sse(
        "`id:` the seq, `event:` the type, `data:` the event as in GET /api/runs/{id}/events; replays then follows, `: ping` while idle, ends after `run_finished`",
      ),
      400: bad,
      401: unauthorized,
      404: missing,
    },
  },
  {
    method: "post",
    path: "/api/runs/:id/stop",
    summary: "Stop a run",
    tag: "runs",
    auth: "bearer",
    responses: {
      202: {
        description:
          "stopping, or stopped when no worker held it; a stopped run answers stopped again (idempotent)",
        json: "StopAccepted",
      },
      401: unauthorized,
      404: missing,
      409: err("run_finished: the run ended otherwise (succeeded or failed)"),
    },
  },
  {
    method: "post",
    path: "/api/runs/:id/rollback",
    summary: "Restore the workspace to the snapshot after iteration n (0: before the run)",
    tag: "runs",
    auth: "bearer",
    body: "RollbackBody",
    responses: {
      200: { description: "restored; the files it changed back", json: "RollbackApplied" },
      400: bad,
      401: unauthorized,
      404: err("not_found: no such run, or no snapshot of that iteration"),
      409: err("session_busy: the session has an active run (`activeRunId`)"),
    },
  },
  {
    method: "post",
    path: "/api/runs/:id/approve",
    summary: "Approve the plan of a run awaiting approval (optionally an edited plan)",
    tag: "runs",
    auth: "bearer",
    body: "ApproveBody",
    bodyOptional: true,
    responses: {
      202: { description: "approved; the run is queued to go on", json: "ApprovalAccepted" },
      400: bad,
      401: unauthorized,
      404: missing,
      409: err(
        "run_finished, or not_awaiting_approval: the run does not wait for a plan approval (`status`, `awaiting`)",
      ),
      503: err("unavailable: the queue (Redis) is down"),
    },
  },
  {
    method: "post",
    path: "/api/runs/:id/reject",
    summary:
      "Reject the plan (or decline the question) of a run awaiting approval: it ends stopped",
    tag: "runs",
    auth: "bearer",
    body: "RejectBody",
    responses: {
      200: { description: "the run ended `stopped`", json: "ApprovalRejected" },
      400: bad,
      401: unauthorized,
      404: missing,
      409: err("run_finished, or not_awaiting_approval: the run does not wait for a person"),
    },
  },
  {
    method: "post",
    path: "/api/runs/:id/reply",
    summary: "Answer the question of a blocked agent: the answer is the next iteration's feedback",
    tag: "runs",
    auth: "bearer",
    body: "ReplyBody",
    responses: {
      202: { description: "answered; the run is queued to go on", json: "ApprovalAccepted" },
      400: bad,
      401: unauthorized,
      404: missing,
      409: err(
        "run_finished, or not_awaiting_approval: the run does not wait for a reply (`status`, `awaiting`)",
      ),
      503: err("unavailable: the queue (Redis) is down"),
    },
  },
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
  {
    method: "get",
    path: "/healthz",
    summary: "Health: Redis and the database (as /readyz)",
    tag: "ops",
    auth: "none",
    responses: {
      200: { description: "both up", json: "Readiness" },
      503: { description: "one is down", json: "Readiness" },
    },
  },
  {
    method: "get",
    path: "/readyz",
    summary: "Readiness: Redis and the database",
    tag: "ops",
    auth: "none",
    responses: {
      200: { description: "both up", json: "Readiness" },
      503: { description: "one is down", json: "Readiness" },
    },
  },
  ...dashboardOperations(),
];

function dashboardOperations(): OperationDoc[] {
  const page = (path: string, summary: string): OperationDoc => ({
    method: "get",
    path,
    summary,
    tag: "dashboard",
    auth: "cookie",
    responses: {
      200: { description: "the page", media: "text/html" },
      302: { description: "to /login when API_TOKEN is set and the dashboard cookie is missing" },
    },
  });
  return [
    page("/", "Dashboard: runs, live"),
    page("/runs/:id", "Dashboard: one run, live"),
    page("/stats", "Dashboard: statistics across runs and what runs learned"),
    {
      method: "get",
      path: "/login",
      summary: "Dashboard sign-in form (when API_TOKEN is set)",
      tag: "dashboard",
      auth: "none",
      responses: { 200: { description: "the form", media: "text/html" } },
    },
    {
      method: "post",
      path: "/login",
      summary: "Sign in with the API token: sets the dashboard cookie",
      tag: "dashboard",
      auth: "none",
      responses: {
        303: { description: "signed in: back to the page asked for" },
        401: { description: "wrong token: the form again", media: "text/html" },
      },
    },
    {
      method: "post",
      path: "/logout",
      summary: "Sign out: clears the dashboard cookie",
      tag: "dashboard",
      auth: "none",
      responses: { 303: { description: "to /login" } },
    },
    {
      method: "get",
      path: "/dashboard/assets/:file",
      summary: "The dashboard's scripts and styles (served from the API, no CDN)",
      tag: "dashboard",
      auth: "none",
      responses: {
        200: { description: "a script or a stylesheet", media: "application/javascript" },
        404: missing,
      },
    },
  ];
}
