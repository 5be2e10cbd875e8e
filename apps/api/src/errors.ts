import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ZodError } from "zod";

export type ErrorCode =
  | "invalid_request"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "run_already_active"
  | "run_finished"
  | "session_busy"
  | "workspace_missing"
  | "not_awaiting_approval"
  | "payload_too_large"
  | "idempotency_conflict"
  | "rate_limited"
  | "unavailable"
  | "internal";

/** An error the API answers with `{"error": {code, message, ...extra}}`. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: ErrorCode,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }

  toBody() {
    return { error: { code: this.code, message: this.message, ...this.extra } };
  }
}

export interface Issue {
  path: string;
  message: string;
}

export function invalidRequest(issues: Issue[]): ApiError {
  const first = issues[0];
  const message = first
    ? `${first.path === "" ? "body" : first.path}: ${first.message}`
    : "invalid request";
  return new ApiError(400, "invalid_request", message, { issues });
}

type ZodIssue = ZodError["issues"][number];

/**
 * Whether `other` says the same as `issue` about the same field, with a bound as tight or
 * tighter: a number past both the field's own maximum and a safe integer's breaks two checks,
 * of which the client needs the one it can meet.
 */
function overruled(issue: ZodIssue, other: ZodIssue): boolean {
  if (other === issue || other.code !== issue.code) return false;
  if (other.path.join("\0") !== issue.path.join("\0")) return false;
  if (issue.code === "too_big" && other.code === "too_big") {
    return Number(other.maximum) < Number(issue.maximum);
  }
  if (issue.code === "too_small" && other.code === "too_small") {
    return Number(other.minimum) > Number(issue.minimum);
  }
  return false;
}

export function fromZodError(error: ZodError, prefix?: string): ApiError {
  const issues = error.issues.filter((i) => !error.issues.some((other) => overruled(i, other)));
  return invalidRequest(
    issues.flatMap((issue) => {
      const path = issue.path.map(String);
      // An unknown key is reported at the key itself, so the message names the field.
      if (issue.code === "unrecognized_keys") {
        return issue.keys.map((key) => ({
          path: [prefix, ...path, key].filter(Boolean).join("."),
          message: "unknown field",
        }));
      }
      return [{ path: [prefix, ...path].filter(Boolean).join("."), message: issue.message }];
    }),
  );
}

export const notFound = (what: string) => new ApiError(404, "not_found", `${what} not found`);
export const unavailable = (what: string) =>
  new ApiError(503, "unavailable", `${what} is unavailable, try again later`);
