import { EventsStreamQuery, RunsStreamQuery } from "../routes/events-stream";
import { ListEventsQuery, ListRunsQuery } from "../routes/runs";
import {
  bad,
  err,
  missing,
  type OperationDoc,
  sse,
  unauthorized,
  unavailable,
} from "./operation-doc";

/** The routes of runs: submitting, reading, following live, steering. */
export const RUN_OPERATIONS: OperationDoc[] = [
  {
    method: "post",
    path: "/api/runs",
    summary: "Submit a run",
    tag: "runs",
    auth: "bearer",
    body: "RunSubmission",
    headers: [
      {
        name: "Idempotency-Key",
        description:
          "1 to 200 visible ASCII characters: the same key with the same body returns the same run (the first answer) for 24 hours; with another body, 422",
      },
    ],
    responses: {
      202: { description: "accepted and queued", json: "RunAccepted" },
      400: bad,
      401: unauthorized,
      409: err("run_already_active: the session has an active run (`activeRunId`)"),
      413: err("payload_too_large"),
      422: err("idempotency_conflict: the Idempotency-Key came before with another body"),
      503: unavailable,
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
      404: err("not_found: `runId` names no run"),
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
        "`id:` the seq, `event:` the type, `data:` the event as in GET /api/runs/{id}/events; replays then follows, `: ping` while idle, ends after `run_finished` (a finished run's replay includes what was stored after it, e.g. `rollback_applied`)",
      ),
      204: {
        description:
          "the run is finished and has no event after Last-Event-ID (or `after`): nothing to stream, and an EventSource stops reconnecting",
      },
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
      409: err(
        "session_busy: the session has an active run (`activeRunId`); workspace_missing: the run's workspace directory is gone (`workspace`)",
      ),
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
      503: unavailable,
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
      503: unavailable,
    },
  },
];
