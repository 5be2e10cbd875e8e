import { EditedPlan, NOT_BLANK } from "@looprun/core";
import type { ApprovalAnswer } from "@looprun/db";
import type { Context } from "hono";
import { Hono } from "hono";
import { z } from "zod";
import type { AppDeps } from "../app-deps";
import { ApiError, notFound, unavailable } from "../errors";
import { readBodyText } from "../request-body";
import { parseBody } from "../request-parsing";

/** `POST /api/runs/:id/approve` body: empty, or a person's edit of the plan. */
export const ApproveBody = z.strictObject({ plan: EditedPlan.optional() });
export type ApproveBody = z.infer<typeof ApproveBody>;
/** `POST /api/runs/:id/reject` body: why (it becomes the run's summary). */
export const RejectBody = z.strictObject({ reason: z.string().trim().min(1, NOT_BLANK).max(2000) });
/** `POST /api/runs/:id/reply` body: the answer to the blocked agent's question. */
export const ReplyBody = z.strictObject({
  message: z.string().trim().min(1, NOT_BLANK).max(20_000),
});

type Done = Extract<ApprovalAnswer, { kind: "done" }>;

/**
 * A person's side of `awaiting_approval`: approve (or edit) the plan, reject it, or answer a
 * blocked agent. Approve and reply queue the run again; reject ends it `stopped`.
 */
export function approvalRoutes(deps: AppDeps): Hono {
  const app = new Hono();
  const now = deps.now ?? Date.now;
  // Typed secrets (a key pasted into an answer) are stored redacted, like submissions.
  const redact = <T>(value: T): T => (deps.redactor ? deps.redactor.deep(value) : value);

  /** Maps what the store did to the reply: 404, 409 run_finished, 409 not_awaiting_approval. */
  const settled = (id: string, expected: string, result: ApprovalAnswer): Done => {
    switch (result.kind) {
      case "not_found":
        throw notFound(`run ${id}`);
      case "finished":
        throw new ApiError(
          409,
          "run_finished",
          `run ${id} has already finished (${result.run.status})`,
          { status: result.run.status },
        );
      case "not_waiting": {
        const { run } = result;
        const waitingFor = run.status === "awaiting_approval" ? (run.approval?.kind ?? null) : null;
        throw new ApiError(
          409,
          "not_awaiting_approval",
          waitingFor === null
            ? `run ${id} is not waiting for a person (it is ${run.status})`
            : `run ${id} waits for ${waitingFor === "plan" ? "its plan to be approved" : "a reply to its question"}, not for ${expected}`,
          { status: run.status, awaiting: waitingFor },
        );
      }
      case "done":
        return result;
    }
  };

  /** The approve body is optional: none at all counts as `{}` (the text is read once, kept). */
  const approveBody = async (c: Context): Promise<ApproveBody> =>
    (await readBodyText(c)).trim() === "" ? {} : parseBody(c, ApproveBody);

  const loadRun = async (id: string) => {
    if (!(await deps.repo.getRun(id))) throw notFound(`run ${id}`);
  };

  const queueAgain = async (id: string) => {
    try {
      await deps.queue.requeue(id);
    } catch {
      // Redis failed after the check: the run is queued in the database, the source of
      // truth, and the workers' reconciler enqueues it.
    }
  };

  app.post("/:id/approve", async (c) => {
    const id = c.req.param("id");
    await loadRun(id);
    const body = await approveBody(c);
    if (!deps.queue.isReady()) throw unavailable("the queue (Redis)");
    const edited = body.plan === undefined ? null : redact(body.plan);
    const result = settled(id, "an approval", await deps.repo.approvals.approve(id, now(), edited));
    await queueAgain(id);
    return c.json({ id, status: result.run.status }, 202);
  });

  app.post("/:id/reply", async (c) => {
    const id = c.req.param("id");
    await loadRun(id);
    const { message } = await parseBody(c, ReplyBody);
    if (!deps.queue.isReady()) throw unavailable("the queue (Redis)");
    const result = settled(
      id,
      "a reply",
      await deps.repo.approvals.reply(id, now(), redact(message)),
    );
    await queueAgain(id);
    return c.json({ id, status: result.run.status }, 202);
  });

  app.post("/:id/reject", async (c) => {
    const id = c.req.param("id");
    await loadRun(id);
    const { reason } = await parseBody(c, RejectBody);
    const result = settled(
      id,
      "a rejection",
      await deps.repo.approvals.reject(id, now(), redact(reason)),
    );
    return c.json({ id, status: result.run.status }, 200);
  });

  return app;
}
