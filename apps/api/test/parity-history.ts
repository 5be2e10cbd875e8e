// A history written the same way into an API on either engine — submits, stops and a person's
// answers over HTTP, a worker's commits through the engine's RunStore — for engine-parity.test.ts.
import type {
  IterationOutcome,
  IterationRecord,
  IterationStatus,
  NewEvent,
  NewToolCall,
  RunMutation,
  RunStore,
} from "@looprun/core";
import type { ApiHarness } from "./api-harness";

export const T0 = Date.UTC(2031, 2, 3, 10, 20);
const MINUTE = 60_000;
const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/** A clock the test moves, and ULIDs in creation order: the same ids and times on both engines. */
export function determinism() {
  const clock = { t: T0 };
  let counter = 0;
  const newId = () => {
    counter += 1;
    let tail = "";
    for (let n = counter, i = 0; i < 16; i++, n = Math.floor(n / 32))
      tail = CROCKFORD[n % 32] + tail;
    return `01JQ000000${tail}`;
  };
  return { clock, deps: { now: () => clock.t, newId } };
}

/** What the HTTP calls of the script answered, in order (compared across engines). */
export type Transcript = { step: string; status: number; body: unknown }[];

const budget = (remainingIterations: number, reason?: string) => ({
  elapsedMs: 0,
  remainingIterations,
  ...(reason ? { reason } : {}),
});

function iteration(
  runId: string,
  n: number,
  attempt: number,
  startedAt: number,
  decided?: { status: IterationStatus; outcome: IterationOutcome | null; at: number },
): IterationRecord {
  return {
    runId,
    n,
    attempt,
    status: decided?.status ?? "running",
    outcome: decided?.outcome ?? null,
    prompt: `iteration ${n} of ${runId}`,
    agent: decided ? { exitCode: 0, output: `agent ${n}.${attempt}`, durationMs: 1200 + n } : null,
    validation: decided
      ? [
          {
            command: "npm test",
            exitCode: decided.status === "passed" ? 0 : 1,
            durationMs: 800 + attempt,
            output: decided.status === "passed" ? "ok" : `FAIL test ${n}`,
          },
        ]
      : [],
    reviewId: null,
    feedback: decided?.status === "failed" ? `fix test ${n}` : null,
    startedAt,
    finishedAt: decided?.at ?? null,
  };
}

function decidedPatch(it: IterationRecord) {
  const { status, outcome, agent, validation, feedback, finishedAt } = it;
  return { status, outcome, agent, validation, feedback, finishedAt };
}

function toolCalls(n: number, failing: boolean): NewToolCall[] {
  return [
    {
      iteration: n,
      server: "workspace",
      tool: "write_file",
      args: { path: `src/file-${n}.ts`, content: "x" },
      isError: false,
      result: "written",
      durationMs: 12 + n,
    },
    {
      iteration: n,
      server: "workspace",
      tool: "run_command",
      args: { command: "npm test", timeoutMs: 1000 },
      isError: failing,
      result: failing ? `exit 1: FAIL test ${n}` : "ok",
      durationMs: 300 + n,
    },
  ];
}

/** Drives one run as a worker would, ending as `kind` says (or left active). */
async function work(store: RunStore, runId: string, sessionId: string, kind: number, t0: number) {
  const claimed = await store.claimRun(runId);
  if (!claimed) throw new Error(`run ${runId} is missing`);
  const epoch = claimed.run.epoch;
  let t = t0;
  const commit = (m: RunMutation) => {
    t += 1000;
    return store.commit(runId, epoch, m, t);
  };
  const ev = (type: NewEvent["type"], data: Record<string, unknown>): NewEvent => ({
    type,
    data: { ...data, budget: budget(5) },
  });
  await commit({
    run: { status: "running", startedAt: t0, deadlineAt: t0 + 45 * MINUTE, progress: "starting" },
    events: [ev("run_started", { worker: "w1" })],
  });
  if (kind === 5) {
    await commit({
      run: {
        status: "awaiting_approval",
        progress: "awaiting approval of the plan: approve or reject it",
        plan: {
          version: 1,
          steps: [{ id: 1, title: "read", detail: null, status: "todo", failures: 0, note: null }],
          reason: null,
        },
        approval: {
          kind: "plan",
          requestedAt: t,
          iteration: 0,
          question: null,
          plan: "1. read",
          resolvedAt: null,
        },
      },
      events: [ev("approval_requested", { kind: "plan" })],
    });
    return;
  }
  const iterations = kind === 0 ? 2 : kind === 1 || kind === 3 ? 3 : kind === 4 ? 1 : 1;
  let failures = 0;
  for (let n = 1; n <= iterations; n++) {
    const start = t;
    await commit({
      run: { iteration: n, progress: `iteration ${n}` },
      insertIteration: iteration(runId, n, 1, start),
      events: [ev("iteration_started", { iteration: n, attempt: 1 })],
    });
    let attempt = 1;
    if (kind === 4) {
      await commit({
        updateIteration: { n, attempt: 1, patch: { status: "abandoned", finishedAt: t } },
        insertIteration: iteration(runId, n, 2, t),
        events: [ev("run_resumed", { iteration: n, abandonedAttempt: 1 })],
      });
      attempt = 2;
    }
    // The last run of a session stays active: running its first iteration.
    if (kind === 6) return;
    const passes = (kind === 0 && n === 2) || kind === 4;
    if (!passes) failures += 1;
    const outcome: IterationOutcome = passes
      ? "complete"
      : kind === 3
        ? "agent_failed"
        : "validation_failed";
    const done = { status: passes ? "passed" : "failed", outcome, at: t + 500 } as const;
    const last = n === iterations;
    const finish = last
      ? passes
        ? { status: "succeeded", reason: "success" }
        : { status: "failed", reason: kind === 3 ? "consecutive_failures" : "max_iterations" }
      : null;
    await commit({
      run: {
        metrics: {
          iterations: n,
          validationFailures: failures,
          reviewBlockings: kind === 0 && n === 1 ? 1 : 0,
          toolCalls: 2 * n,
          toolFailures: failures,
          tokens: 100 * n,
        },
        consecutiveFailures: passes ? 0 : failures,
        ...(finish
          ? {
              status: finish.status as "succeeded" | "failed",
              reason: finish.reason as "success",
              summary: `${finish.status} after ${n}`,
              finishedAt: t + 600,
              progress: finish.status,
            }
          : {}),
      },
      updateIteration: {
        n,
        attempt,
        patch: decidedPatch(iteration(runId, n, attempt, start, done)),
      },
      toolCalls: toolCalls(n, !passes),
      ...(kind === 0
        ? {
            insertReview: {
              id: `${runId}-review-${n}`,
              runId,
              sessionId,
              phase: "review",
              iteration: n,
              blockingIssues: n === 1 ? ["Tests fail", "missing docs"] : [],
              nonBlockingIssues: ["naming"],
              score: n === 1 ? 40 : 92.5,
              fixPlan: n === 1 ? ["fix the test"] : [],
              createdAt: t,
            },
            insertSnapshots: [
              {
                runId,
                n,
                attempt,
                snapshotId: `snap-${runId}-${n}`,
                parentId: n === 1 ? `base-${runId}` : `snap-${runId}-${n - 1}`,
                diff: `--- a/src/file.ts\n+++ b/src/file.ts\n@@ -1 +1 @@\n-${n - 1}\n+${n}\n`,
                diffBytes: 60,
                diffTruncated: n === 2,
                createdAt: t,
              },
            ],
            change: {
              runId,
              baselineSnapshot: `base-${runId}`,
              headSnapshot: `snap-${runId}-${n}`,
              iteration: n,
              files: ["src/file.ts", "README.md"],
              stat: " 2 files changed",
              patch: n === 1 ? "diff --git a/src/file.ts b/src/file.ts\n" : null,
              patchBytes: 40 * n,
              updatedAt: t,
            },
            ...(n === 1
              ? { phaseArtifact: { runId, phase: "planning", content: "# Plan", createdAt: t } }
              : {}),
          }
        : {}),
      events: [
        ev(passes ? "validation_passed" : "validation_failed", { iteration: n }),
        ...(finish ? [ev("run_finished", { status: finish.status, reason: finish.reason })] : []),
      ],
    });
  }
}

const SESSIONS = ["alpha", "beta", "gamma", "delta"];

/**
 * 24 runs in 4 sessions, 7 minutes apart (over hour boundaries): succeeded, failed, stopped
 * while queued, resumed after an abandoned attempt, awaiting a person then approved (with an
 * edit), answered or rejected; the last of each session still running or queued.
 */
export async function writeHistory(
  h: ApiHarness,
  clock: { t: number },
  transcript: Transcript,
): Promise<string[]> {
  const ids: string[] = [];
  const record = async (step: string, method: string, path: string, body?: unknown) => {
    const res = await h.request(method, path, body);
    transcript.push({ step, status: res.status, body: res.body });
    return res;
  };
  for (let i = 0; i < 24; i++) {
    clock.t = T0 + i * 7 * MINUTE;
    const session = SESSIONS[i % SESSIONS.length] as string;
    const kind = i >= 20 ? (i % 2 === 0 ? 6 : 7) : i % 6;
    const submitted = await record(`submit ${i}`, "POST", "/api/runs", {
      task: `task ${i}`,
      sessionId: session,
      agent: { type: "command", command: `./agent.sh ${i}` },
      testCommand: "npm test",
      maxIterations: 5,
      ...(i % 3 === 0 ? { workspace: "shared" } : {}),
      ...(kind === 5 ? { phases: ["planning"], approval: "plan" } : {}),
    });
    const id = submitted.body.id as string;
    ids.push(id);
    if (kind === 2) {
      await record(`stop ${i}`, "POST", `/api/runs/${id}/stop`);
      continue;
    }
    if (kind === 7) continue; // left queued
    await work(h.store, id, session, kind, clock.t + 2000);
    if (kind === 5) {
      clock.t += 3 * MINUTE;
      const answer = Math.floor(i / 6);
      if (answer === 0) {
        await record(`approve ${i}`, "POST", `/api/runs/${id}/approve`, {
          plan: { steps: [{ title: "edited step", detail: "by a person" }] },
        });
      } else if (answer === 1) {
        await record(`reject ${i}`, "POST", `/api/runs/${id}/reject`, { reason: "not now" });
      } else {
        await record(`reply ${i}`, "POST", `/api/runs/${id}/reply`, { message: "yes" });
        await record(`reject ${i}`, "POST", `/api/runs/${id}/reject`, { reason: "after all" });
      }
      // A run that goes on after its approval ends here: stopped by a person.
      const stop = await record(`stop ${i}`, "POST", `/api/runs/${id}/stop`);
      if (stop.status !== 202 && stop.status !== 409) throw new Error(`stop: ${stop.status}`);
    }
  }
  return ids;
}
