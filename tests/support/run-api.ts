import { expect } from "vitest";
import { StopWaiting, type WaitOptions, waitFor } from "./processes";
import type { Stack } from "./stack";

// Runs through the API: submitting, reading, waiting for a status or an event.

export const TERMINAL = ["succeeded", "failed", "stopped"] as const;

export interface RunView {
  id: string;
  sessionId: string;
  task: string;
  workspace: string;
  status: string;
  reason: string | null;
  summary: string | null;
  iteration: number;
  progress: string | null;
  budget: {
    maxIterations: number;
    maxMinutes: number;
    elapsedMs: number;
    remainingIterations: number;
    deadlineAt: string | null;
  };
  metrics: { iterations: number; validationFailures: number };
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

export interface IterationView {
  n: number;
  attempt: number;
  status: string;
  outcome: string | null;
  prompt: string;
  agent: { exitCode: number | null; output: string; durationMs: number } | null;
  validation: { command: string; exitCode: number | null; durationMs: number; output: string }[];
  feedback: string | null;
  startedAt: string;
  finishedAt: string | null;
}

export interface EventView {
  seq: number;
  type: string;
  at: string;
  data: Record<string, unknown> & {
    budget: { elapsedMs: number; remainingIterations: number; reason?: string };
  };
}

/** Events have gap-free `seq` from 1, a time, and the budget snapshot in their data. */
export function expectWellFormedEvents(events: EventView[]): void {
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  for (const e of events) {
    expect(e.data.budget, `budget of event ${e.seq} (${e.type})`).toMatchObject({
      elapsedMs: expect.any(Number),
      remainingIterations: expect.any(Number),
    });
    // The same snapshot, spread into the data itself.
    expect(e.data, `data of event ${e.seq} (${e.type})`).toMatchObject({
      elapsedMs: e.data.budget.elapsedMs,
      remainingIterations: e.data.budget.remainingIterations,
    });
    if (e.data.budget.reason !== undefined) {
      expect(e.data.reason, `reason of event ${e.seq} (${e.type})`).toBe(e.data.budget.reason);
    }
    expect(Number.isNaN(Date.parse(e.at)), `time of event ${e.seq}`).toBe(false);
  }
  // Every agent_started has its agent_finished before the next iteration or the run's end (a
  // crashed worker's too: the run's next step, or the stop that ends it, writes it).
  let agentRunning: number | null = null;
  for (const e of events) {
    if (e.type === "agent_started") agentRunning = e.seq;
    else if (e.type === "agent_finished") agentRunning = null;
    else if (e.type === "iteration_started" || e.type === "run_finished") {
      expect(agentRunning, `the agent_finished of event ${agentRunning}`).toBeNull();
    }
  }
}

/** A command agent body with the given command (and no cooldown unless asked). */
export function commandRun(
  command: string,
  rest: Record<string, unknown> = {},
): Record<string, unknown> {
  return { task: "e2e task", agent: { type: "command", command }, cooldownMs: 0, ...rest };
}

/** POST /api/runs (with `opts`' credentials, if any); asserts the 202 and returns its body. */
export async function submit(
  stack: Stack,
  body: Record<string, unknown>,
  opts?: Parameters<Stack["api"]>[3],
): Promise<{ id: string; sessionId: string }> {
  const res = await stack.api("POST", "/api/runs", body, opts);
  if (res.status !== 202) {
    throw new Error(`POST /api/runs answered ${res.status}: ${JSON.stringify(res.body)}`);
  }
  return res.body;
}

export async function getRun(stack: Stack, id: string): Promise<RunView> {
  const res = await stack.api<RunView>("GET", `/api/runs/${id}`);
  if (res.status !== 200) throw new Error(`GET /api/runs/${id} answered ${res.status}`);
  return res.body;
}

export async function getIterations(stack: Stack, id: string): Promise<IterationView[]> {
  const res = await stack.api<{ items: IterationView[] }>("GET", `/api/runs/${id}/iterations`);
  if (res.status !== 200) throw new Error(`GET /api/runs/${id}/iterations answered ${res.status}`);
  return res.body.items;
}

/** Every event of a run (following `after` pages). */
export async function getEvents(stack: Stack, id: string): Promise<EventView[]> {
  const all: EventView[] = [];
  for (;;) {
    const after = all.at(-1)?.seq ?? 0;
    const res = await stack.api<{ items: EventView[] }>(
      "GET",
      `/api/runs/${id}/events?after=${after}`,
    );
    if (res.status !== 200) throw new Error(`GET /api/runs/${id}/events answered ${res.status}`);
    if (res.body.items.length === 0) return all;
    all.push(...res.body.items);
  }
}

/** Waits until the run satisfies `predicate` and returns it. */
export async function waitForRun(
  stack: Stack,
  id: string,
  predicate: (run: RunView) => boolean,
  opts: WaitOptions = {},
): Promise<RunView> {
  let last: RunView | undefined;
  try {
    return await waitFor(async () => {
      last = await getRun(stack, id);
      return predicate(last) ? last : undefined;
    }, opts);
  } catch (error) {
    throw new Error(`${(error as Error).message}\nrun: ${JSON.stringify(last)}\n${stack.logs()}`);
  }
}

/** Waits until the run reaches `statuses` (default: any terminal status). */
export function waitForStatus(
  stack: Stack,
  id: string,
  statuses: readonly string[] = TERMINAL,
  opts: WaitOptions = {},
): Promise<RunView> {
  return waitForRun(
    stack,
    id,
    (r) => {
      if (statuses.includes(r.status)) return true;
      if ((TERMINAL as readonly string[]).includes(r.status)) {
        throw new StopWaiting(
          `run ${id} ended ${r.status} (${r.reason}: ${r.summary}), not ${statuses.join("|")}`,
        );
      }
      return false;
    },
    {
      message: `run ${id} reaching ${statuses.join("|")}`,
      ...opts,
    },
  );
}

/** Waits until the run has an event of `type` and returns it. */
export async function waitForEvent(
  stack: Stack,
  id: string,
  type: string,
  opts: WaitOptions = {},
): Promise<EventView> {
  return waitFor(async () => (await getEvents(stack, id)).find((e) => e.type === type), {
    message: `event ${type} of run ${id}`,
    ...opts,
  });
}
