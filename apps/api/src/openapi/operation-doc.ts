import { RunSubmission } from "@looprun/core";
import type { z } from "zod";
import { ApproveBody, RejectBody, ReplyBody } from "../routes/approval";
import { RollbackBody } from "../routes/rollback";
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

export const err = (description: string): ResponseDoc => ({ description, json: "Error" });
export const bad = err("invalid_request: a parameter is invalid (`issues` names it)");
export const missing = err("not_found");
export const unauthorized = err(
  "unauthorized: API_TOKEN is set and the bearer token is missing or wrong",
);

export const sse = (description: string): ResponseDoc => ({
  description,
  media: "text/event-stream",
});

export const unavailable = err("unavailable: the queue (Redis) is down");
