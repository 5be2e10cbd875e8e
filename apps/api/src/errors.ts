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

/** How far a union's form is from what was sent: a wrong kind or a field it lacks, a lot. */
function distance(branch: readonly ZodIssue[]): number {
  return branch.reduce(
    (sum, i) =>
      sum +
      (i.path.length === 0 && i.code === "invalid_type"
        ? 100
        : i.code === "unrecognized_keys"
          ? 10 * i.keys.length
          : 1),
    0,
  );
}

const at = (base: readonly PropertyKey[], issue: ZodIssue): ZodIssue => ({
  ...issue,
  path: [...base, ...issue.path],
});

/**
 * A union's "Invalid input" as what the client can fix: the issues of the form the input comes
 * closest to (`{name, command: 5}` is a stdio server whose `command` must be text, not an
 * HTTP one lacking `url`); when two forms are as close, one issue saying what each lacks.
 */
function unionIssues(issue: ZodIssue): ZodIssue[] {
  if (issue.code !== "invalid_union" || issue.errors.length === 0) return [issue];
  const ranked = issue.errors
    .map((branch) => ({ branch, d: distance(branch) }))
    .sort((a, b) => a.d - b.d);
  const [best, next] = ranked;
  if (best === undefined) return [issue];
  const described = (branch: readonly ZodIssue[]) =>
    branch.flatMap((i) => unionIssues(at(issue.path, i)));
  if (next === undefined || best.d < next.d) return described(best.branch);
  const ties = ranked.filter((r) => r.d === best.d).map((r) => described(r.branch));
  const says = (branch: readonly ZodIssue[]) =>
    branch
      .map((i) => {
        const path = i.path.slice(issue.path.length).map(String).join(".");
        const message =
          i.code === "unrecognized_keys" ? `unknown field ${i.keys.join(", ")}` : i.message;
        return path === "" ? message : `${path}: ${message}`;
      })
      .join(", ");
  const forms = [...new Set(ties.map(says))];
  if (forms.length === 1) return ties[0] ?? [issue];
  return [{ ...issue, message: `matches none of its forms: ${forms.join("; or ")}` }];
}

export function fromZodError(error: ZodError, prefix?: string): ApiError {
  const all = error.issues.flatMap(unionIssues);
  const issues = all.filter((i) => !all.some((other) => overruled(i, other)));
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
