import { createHash } from "node:crypto";
import {
  computeConvergence,
  killRunOrphans,
  normalizeSubmission,
  Redactor,
  RUN_STATUSES,
  RunAlreadyActiveError,
  type RunRecord,
  RunSubmission,
} from "@looprun/core";
import {
  IdempotencyConflictError,
  idempotencyKeyHash,
  type NewRun,
  SessionWorkspaceMismatchError,
} from "@looprun/db";
import { Hono } from "hono";
import { monotonicFactory } from "ulid";
import { z } from "zod";
import type { AppDeps } from "../app-deps";
import { ApiError, invalidRequest, notFound, unavailable } from "../errors";
import { jsonBody } from "../json-body";
import { pooledRandom } from "../pooled-random";
import {
  presentEvent,
  presentIteration,
  presentReview,
  presentRun,
  presentToolCall,
} from "../presenters";
import { parseBody, parseQuery, queryInt } from "../request-parsing";
import { checkSessionWorkspace, guessWorkspace, resolveWorkspace } from "../workspaces";
import { approvalRoutes } from "./approval";
import { rollbackRoutes } from "./rollback";
import { runArtifactRoutes } from "./run-artifacts";

/** A ULID: Crockford's base32, 26 characters, the first at most 7 (a 48-bit time leads). */
const ULID = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/;

/** Fields read as prose (the agent's prompt): a secret in them is stored, and read, redacted. */
const PROSE_FIELDS = new Set(["task", "requirements"]);

/** What the patterns alone redact (key shapes), to tell them from the environment's values. */
const SHAPES = new Redactor();
const WHOSE_VALUE =
  "holds the value of one of the API's secrets (API_TOKEN, MISTRAL_API_KEY, a DATABASE_URL or REDIS_URL password, LOOPRUN_SECRET_ENV, AGENT_ENV_ALLOWLIST)";

/**
 * Refuses a secret written out in a setting that runs (a command, an argument, a url): it would
 * be stored redacted, and `[REDACTED]` would run in its place.
 */
function refuseWrittenOutSecrets(body: RunSubmission, redactor: Redactor): void {
  const paths = redactor
    .changedPaths(body)
    .filter((path) => !PROSE_FIELDS.has(path.split(".")[0] ?? ""));
  if (paths.length === 0) return;
  const shapes = new Set(SHAPES.changedPaths(body));
  throw invalidRequest(
    paths.map((path) => ({
      path,
      message: `${shapes.has(path) ? "holds what looks like a secret" : WHOSE_VALUE}: a run's settings are stored redacted, so \`[REDACTED]\` would run in its place; keep it in the workers' environment and name the variable ($NAME, allowed by AGENT_ENV_ALLOWLIST)`,
    })),
  );
}

export const ListRunsQuery = z.strictObject({
  sessionId: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, "must match [A-Za-z0-9_-]{1,64}")
    .optional(),
  status: z.enum(RUN_STATUSES).optional(),
  limit: queryInt(z.number().int().min(1).max(100).default(20)),
  cursor: z.string().regex(ULID, "must be a nextCursor returned by this endpoint").optional(),
});

export const ListEventsQuery = z.strictObject({
  after: queryInt(z.number().int().min(0).default(0)),
  limit: queryInt(z.number().int().min(1).max(1000).default(1000)),
});

/** JSON with sorted keys: two bodies that mean the same hash the same. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

function idempotencyOf(header: string | undefined, body: unknown) {
  if (header === undefined) return undefined;
  if (!/^[\x21-\x7e]{1,200}$/.test(header)) {
    throw invalidRequest([
      { path: "Idempotency-Key", message: "must be 1 to 200 visible ASCII characters" },
    ]);
  }
  // Stored as its hash: a client may use anything as a key, a token included.
  const requestHash = createHash("sha256").update(canonical(body)).digest("hex");
  return { key: idempotencyKeyHash(header), requestHash };
}

/** A session's stored workspace, checked again as a named one is; none stored: one named after it. */
async function sessionsWorkspace(deps: AppDeps, sessionId: string): Promise<string> {
  const stored = await deps.repo.sessionWorkspace(sessionId);
  return stored !== null
    ? checkSessionWorkspace(deps.workspacesRoot, stored)
    : resolveWorkspace(deps.workspacesRoot, sessionId);
}

/**
 * Stores a submitted run. Submits that arrive together share one transaction, hence one fsync
 * (group commit); `durable` settles once the run is on disk — at once, but for a group commit
 * whose fsync runs off the event loop (the caller overlaps it with the enqueue). A workspace
 * guessed for a session that has another stored nothing: the session's own is looked up,
 * checked, and the run stored with it.
 */
async function storeRun(
  deps: AppDeps,
  newRun: NewRun,
): Promise<{ run: RunRecord & { replayed?: boolean }; durable: Promise<void> }> {
  const commit = async (input: NewRun) => {
    if (!deps.writeBatcher) {
      return { run: await deps.repo.createRun(input), durable: Promise.resolve() };
    }
    const committed = await deps.writeBatcher.run(() => deps.repo.createRun(input));
    return { run: await committed.value, durable: committed.durable };
  };
  try {
    return await commit(newRun);
  } catch (error) {
    if (!(error instanceof SessionWorkspaceMismatchError)) throw error;
    const own = await sessionsWorkspace(deps, newRun.sessionId);
    return commit({ ...newRun, sessionWorkspace: own, workspace: own, workspaceGuessed: false });
  }
}

export function runRoutes(deps: AppDeps): Hono {
  const app = new Hono();
  const now = deps.now ?? Date.now;
  // Monotonic within a millisecond, so ids (and pages) keep the order of creation.
  const newId = deps.newId ?? monotonicFactory(pooledRandom);

  const loadRun = async (id: string) => {
    const run = await deps.repo.getRun(id);
    if (!run) throw notFound(`run ${id}`);
    return run;
  };

  app.post("/", async (c) => {
    const body = await parseBody(c, RunSubmission);
    const idempotency = idempotencyOf(c.req.header("idempotency-key"), body);
    if (deps.redactor) refuseWrittenOutSecrets(body, deps.redactor);
    const normalized = normalizeSubmission(body);
    // Secrets never reach the DB: a literal key in the task or the requirements is stored
    // redacted (the agent reads `[REDACTED]`).
    const spec = deps.redactor ? deps.redactor.deep(normalized) : normalized;
    const sessionId = body.sessionId ?? newId();
    // The workspace the run names; else its session's (a session keeps its workspace); else,
    // for a new session, one named after it. A session the run names is taken to have the one
    // named after it — the usual case — and the store checks that as it writes the run (no
    // lookup first: a round trip on PostgreSQL; see storeRun for one that has another).
    const root = deps.workspacesRoot;
    let workspace: string;
    let workspaceGuessed = false;
    if (body.workspace !== undefined) workspace = resolveWorkspace(root, body.workspace);
    else if (body.sessionId === undefined) workspace = resolveWorkspace(root, sessionId);
    else {
      const guess = guessWorkspace(root, body.sessionId);
      workspaceGuessed = guess !== undefined;
      workspace = guess ?? (await sessionsWorkspace(deps, body.sessionId));
    }
    // After every check of the input (a workspace named badly is a 400 whether Redis is up or
    // not), before anything is stored or enqueued. A guessed workspace is checked as the run is
    // stored: with nothing to store, the session's own is looked up and checked here.
    if (!deps.queue.isReady()) {
      if (workspaceGuessed) await sessionsWorkspace(deps, sessionId);
      throw unavailable("the queue (Redis)");
    }
    let written: Awaited<ReturnType<typeof storeRun>>;
    try {
      written = await storeRun(deps, {
        id: newId(),
        sessionId,
        sessionWorkspace: workspace,
        workspace,
        spec,
        createdAt: now(),
        ...(idempotency ? { idempotency } : {}),
        workspaceGuessed,
      });
    } catch (error) {
      if (error instanceof IdempotencyConflictError) {
        // Not the repository's message: it names the key by its stored hash, which the
        // client never sent.
        throw new ApiError(
          422,
          "idempotency_conflict",
          "this Idempotency-Key was used with a different request body",
        );
      }
      if (error instanceof RunAlreadyActiveError) {
        throw new ApiError(409, "run_already_active", error.message, {
          activeRunId: error.activeRunId,
        });
      }
      throw error;
    }
    const { run, durable } = written;
    // The same key and body again get the first request's answer, whatever the run has done
    // since (GET /api/runs/:id says that).
    const accepted = {
      id: run.id,
      sessionId: run.sessionId,
      status: "queued",
      createdAt: new Date(run.createdAt).toISOString(),
    };
    // Nothing is acknowledged before it is on disk (a replay too: the first request's commit
    // may still be on its way there, and this one's sync covers it).
    if (run.replayed) {
      await durable;
      return c.json(accepted, 202);
    }
    const [enqueued, synced] = await Promise.allSettled([deps.queue.enqueue(run.id), durable]);
    if (synced.status === "rejected") {
      // The disk refused the run: undone as far as it can be (a worker may already hold it;
      // then it is as after a crash between the commit and the answer), and a 500.
      await Promise.allSettled([
        deps.queue.remove(run.id),
        (async () => deps.repo.deleteRun(run.id))(),
      ]);
      throw synced.reason;
    }
    if (enqueued.status === "rejected") {
      // Unless a worker took it (the job reached Redis, only the answer was lost): accepted.
      if (await deps.repo.deleteRun(run.id)) throw unavailable("the queue (Redis)");
    }
    return c.json(accepted, 202);
  });

  app.get("/", async (c) => {
    const q = parseQuery(c, ListRunsQuery);
    const page = await deps.repo.listRuns(q);
    const t = now();
    return jsonBody(c, {
      items: page.items.map((r) => presentRun(r, t)),
      nextCursor: page.nextCursor,
    });
  });

  app.get("/:id", async (c) => {
    const run = await loadRun(c.req.param("id"));
    const [stats, reviews] = await Promise.all([
      deps.repo.toolStats({ runId: run.id }),
      deps.repo.listReviews(run.id),
    ]);
    const t = now();
    return c.json({
      ...presentRun(run, t),
      toolStats: { ...stats.totals, commonErrors: stats.commonErrors },
      convergence: computeConvergence(run, reviews, t),
    });
  });

  app.get("/:id/iterations", async (c) => {
    const run = await loadRun(c.req.param("id"));
    const [snapshots, iterations] = await Promise.all([
      deps.repo.artifacts.snapshots(run.id),
      deps.repo.listIterations(run.id),
    ]);
    // One lookup per iteration, not a scan of every snapshot (a long run has thousands of each).
    const byAttempt = new Map(snapshots.map((s) => [`${s.n}:${s.attempt}`, s]));
    return jsonBody(c, {
      items: iterations.map((it) => presentIteration(it, byAttempt.get(`${it.n}:${it.attempt}`))),
    });
  });

  app.get("/:id/tool-calls", async (c) => {
    const run = await loadRun(c.req.param("id"));
    return jsonBody(c, { items: (await deps.repo.listToolCalls(run.id)).map(presentToolCall) });
  });

  app.get("/:id/reviews", async (c) => {
    const run = await loadRun(c.req.param("id"));
    return jsonBody(c, { items: (await deps.repo.listReviews(run.id)).map(presentReview) });
  });

  app.get("/:id/events", async (c) => {
    const q = parseQuery(c, ListEventsQuery);
    const run = await loadRun(c.req.param("id"));
    const events = await deps.repo.listEvents(run.id, q.after, q.limit);
    return jsonBody(c, { items: events.map(presentEvent) });
  });

  app.route("/", runArtifactRoutes(deps));
  app.route("/", rollbackRoutes(deps));
  app.route("/", approvalRoutes(deps));

  app.post("/:id/stop", async (c) => {
    const id = c.req.param("id");
    const request = await deps.repo.requestStop(id, now());
    switch (request.kind) {
      case "not_found":
        throw notFound(`run ${id}`);
      case "finished":
        // Stopping is idempotent: a stopped run answers as the first stop did. A run that
        // ended otherwise (succeeded, failed) cannot be stopped.
        if (request.run.status === "stopped") return c.json({ id, status: "stopped" }, 202);
        throw new ApiError(
          409,
          "run_finished",
          `run ${id} has already finished (${request.run.status})`,
          {
            status: request.run.status,
          },
        );
      case "stopping": {
        // No worker holds the job (queued, cooling down, or lost): end the run here.
        // A run that waited for a person has no job a worker holds: it ends at once.
        let free = request.waiting === true;
        let redisAnswered = deps.queue.isReady();
        try {
          free ||= redisAnswered && (await deps.queue.remove(id));
        } catch {
          // Redis is down, or does not answer: the worker (its poll of the run's status) or
          // the reconciler ends the run. No publish either: it would wait as long again.
          redisAnswered = false;
        }
        // A job no worker holds may be a crashed worker's: its processes die before `stopped`
        // (the API shares the host with the workers, as SQLite requires).
        if (free) killRunOrphans(request.run);
        const run = free ? ((await deps.repo.finalizeStop(id, now())) ?? request.run) : request.run;
        if (run.status === "stopping" && redisAnswered) await deps.queue.publishStop(id);
        return c.json({ id, status: run.status }, 202);
      }
    }
  });

  return app;
}
