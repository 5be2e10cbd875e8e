import type { ApprovalRequest } from "@looprun/core";
import { describe, expect, it } from "vitest";
import { ENGINES, useApiHarness } from "./api-harness";

const valid = {
  task: "fix the cart",
  agent: { type: "command", command: "true" },
  testCommand: "true",
};

/** Issue 9's bodies and answers, over `app.request()` with a real database and a real Redis queue. */
describe.each(ENGINES)("safety-net settings and answers: validation on %s", (engine) => {
  const h = useApiHarness(engine, {}, { each: true });

  const submit = async (body: Record<string, unknown>) => {
    const res = await h.request("POST", "/api/runs", body);
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    return res.body.id as string;
  };

  /** Everything a bad request must leave as it was: the run, its events, the queue. */
  const stateOf = async (id: string) => ({
    run: await h.repo.getRun(id),
    events: (await h.repo.listEvents(id, 0, 1000)).length,
    jobs: await h.inspect.getJobCounts("waiting", "active", "delayed", "prioritized"),
  });

  it("refuses bad safety-net settings with a 400 naming the field, storing and enqueuing nothing", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ successThreshold: 0 }, "successThreshold"],
      [{ successThreshold: -0.5 }, "successThreshold"],
      [{ successThreshold: 1.01 }, "successThreshold"],
      [{ successThreshold: "0.5" }, "successThreshold"],
      [{ successThreshold: null }, "successThreshold"],
      [{ maxStalledIterations: 0 }, "maxStalledIterations"],
      [{ maxStalledIterations: 2.5 }, "maxStalledIterations"],
      [{ maxStalledIterations: "3" }, "maxStalledIterations"],
      [{ maxStalledIterations: 1001 }, "maxStalledIterations"],
      [{ rollbackOnFailure: "yes" }, "rollbackOnFailure"],
      [{ rollbackOnFailure: 1 }, "rollbackOnFailure"],
      [{ approval: "always" }, "approval"],
      // A plan to approve needs a planner: the mistral agent's plan or the planning phase.
      [{ approval: "plan" }, "approval"],
      [{ approval: "plan", agent: { type: "mistral", plan: false } }, "approval"],
    ];
    for (const [patch, path] of cases) {
      const res = await h.request("POST", "/api/runs", { ...valid, ...patch });
      const what = JSON.stringify(patch);
      expect(res.status, what).toBe(400);
      expect(res.body.error.code, what).toBe("invalid_request");
      expect(
        res.body.error.issues.map((i: { path: string }) => i.path),
        what,
      ).toContain(path);
      expect(res.body.error.message, what).toContain(path);
    }
    expect((await h.repo.listRuns({ limit: 100 })).items).toHaveLength(0);
    expect(await h.inspect.getJobCounts("waiting", "delayed", "prioritized")).toEqual({
      waiting: 0,
      delayed: 0,
      prioritized: 0,
    });
  });

  it("shows the settings a run was given, and their defaults", async () => {
    const plain = await submit(valid);
    expect((await h.request("GET", `/api/runs/${plain}`)).body).toMatchObject({
      successThreshold: 1,
      maxStalledIterations: 3,
      rollbackOnFailure: false,
      approvalMode: "none",
      approval: null,
      partial: false,
      gates: null,
    });
    const set = await submit({
      ...valid,
      successThreshold: 0.5,
      maxStalledIterations: 7,
      rollbackOnFailure: true,
      approval: "plan",
      phases: ["planning"],
    });
    expect((await h.request("GET", `/api/runs/${set}`)).body).toMatchObject({
      successThreshold: 0.5,
      maxStalledIterations: 7,
      rollbackOnFailure: true,
      approvalMode: "plan",
    });
  });

  it("rollback: a bad body gets a 400 naming the field and changes nothing; an active session a 409", async () => {
    const id = await submit(valid);
    const before = await stateOf(id);
    const cases: [unknown, string][] = [
      [{}, "iteration"],
      [{ iteration: "1" }, "iteration"],
      [{ iteration: 1.5 }, "iteration"],
      [{ iteration: -1 }, "iteration"],
      [{ iteration: null }, "iteration"],
      [{ iteration: 0, files: ["a.txt"] }, "files"],
      [[0], ""],
      ["{", ""],
    ];
    for (const [body, path] of cases) {
      const res = await h.request("POST", `/api/runs/${id}/rollback`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
      expect(res.body.error.issues[0].path, JSON.stringify(body)).toBe(path);
    }
    const empty = await h.app.request(`/api/runs/${id}/rollback`, { method: "POST" });
    expect(empty.status).toBe(400);

    // The run is queued: its own session is busy, so its workspace is not touched.
    const busy = await h.request("POST", `/api/runs/${id}/rollback`, { iteration: 0 });
    expect(busy.status).toBe(409);
    expect(busy.body.error).toMatchObject({ code: "session_busy", activeRunId: id });
    expect(await stateOf(id)).toEqual(before);

    const unknown = await h.request("POST", "/api/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/rollback", {
      iteration: 0,
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe("not_found");
  });

  /** A submitted run that a worker paused for a person (as the engine does). */
  async function waitingRun(approval: Omit<ApprovalRequest, "requestedAt" | "resolvedAt">) {
    const id = await submit({ ...valid, phases: ["planning"], approval: "plan" });
    const store = h.store;
    const { run } = (await store.claimRun(id))!;
    await store.commit(
      id,
      run.epoch,
      {
        run: {
          status: "awaiting_approval",
          approval: { ...approval, requestedAt: Date.now(), resolvedAt: null },
        },
      },
      Date.now(),
    );
    // The worker's job completed when the run paused: none is left.
    await h.inspect.obliterate({ force: true });
    return id;
  }

  it("approve, reject and reply: a bad body gets a 400 naming the field and changes nothing", async () => {
    const id = await waitingRun({ kind: "plan", iteration: 0, question: null, plan: "1. go" });
    const before = await stateOf(id);
    expect(before.run?.status).toBe("awaiting_approval");
    const cases: [string, unknown, string][] = [
      ["approve", { plan: { steps: [] } }, "plan.steps"],
      ["approve", { plan: { steps: [{ title: " " }] } }, "plan.steps.0.title"],
      ["approve", { plan: { steps: [{ title: "x", why: "y" }] } }, "plan.steps.0.why"],
      ["approve", { plan: "do it" }, "plan"],
      ["approve", { steps: [{ title: "x" }] }, "steps"],
      ["approve", "{", ""],
      ["reject", {}, "reason"],
      ["reject", { reason: "   " }, "reason"],
      ["reject", { reason: 42 }, "reason"],
      ["reject", { reason: "x".repeat(2001) }, "reason"],
      ["reject", { reason: "no", why: "no" }, "why"],
      ["reply", {}, "message"],
      ["reply", { message: "" }, "message"],
      ["reply", { message: ["hi"] }, "message"],
      ["reply", "not json", ""],
    ];
    for (const [action, body, path] of cases) {
      const what = `${action} ${JSON.stringify(body)}`;
      const res = await h.request("POST", `/api/runs/${id}/${action}`, body);
      expect(res.status, what).toBe(400);
      expect(res.body.error.code, what).toBe("invalid_request");
      expect(res.body.error.issues[0].path, what).toBe(path);
    }
    const noBody = await h.app.request(`/api/runs/${id}/reject`, { method: "POST" });
    expect(noBody.status).toBe(400);
    expect(await stateOf(id)).toEqual(before);
  });

  it("reject declines a blocked agent's question: the run ends stopped, saying so", async () => {
    const id = await waitingRun({
      kind: "question",
      iteration: 1,
      question: "Which greeting?",
      plan: null,
    });
    const res = await h.request("POST", `/api/runs/${id}/reject`, { reason: "out of scope" });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id, status: "stopped" });
    const run = (await h.request("GET", `/api/runs/${id}`)).body;
    expect(run).toMatchObject({
      status: "stopped",
      reason: "stopped",
      summary: "question declined: out of scope",
      approval: null,
    });
    const events = await h.repo.listEvents(id, 0, 1000);
    expect(events.slice(-2).map((e) => [e.type, e.data])).toEqual([
      ["approval_rejected", expect.objectContaining({ kind: "question", reason: "out of scope" })],
      ["run_finished", expect.objectContaining({ status: "stopped", reason: "stopped" })],
    ]);
    // As the API shows them: the snapshot's figures spread into data, and an event's own
    // `reason` left as it is.
    const shown = (await h.request("GET", `/api/runs/${id}/events`)).body.items;
    const rejected = shown.find((e: { type: string }) => e.type === "approval_rejected");
    expect(rejected.data).toMatchObject({
      reason: "out of scope",
      elapsedMs: rejected.data.budget.elapsedMs,
      remainingIterations: rejected.data.budget.remainingIterations,
    });
    expect(await h.inspect.getJobCounts("waiting", "delayed")).toEqual({ waiting: 0, delayed: 0 });
  });
});
