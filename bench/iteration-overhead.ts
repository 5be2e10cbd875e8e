import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { BenchContext } from "./support/context";
import {
  api,
  type BenchStack,
  commandRun,
  startStack,
  submitRun,
  waitForSuccess,
} from "./support/looprun";
import { removeTempDir, spawnTracked, tempDir } from "./support/processes";
import type { ScenarioResult } from "./support/report";
import { pairedRatios, summarize } from "./support/stats";

const ITERATIONS = 40;
const AGENT = "echo line >> lines.txt";
const TEST = `[ "$(wc -l < lines.txt)" -ge ${ITERATIONS} ]`;

/** The Ralph loop in bash: the same two commands, each through `sh -c` as looprun runs them. */
const BASH_LOOP = `
i=0
while [ "$i" -lt ${ITERATIONS} ]; do
  i=$((i + 1))
  sh -c "$AGENT" < PROMPT.md
  if sh -c "$TEST"; then break; fi
done
[ "$i" -eq ${ITERATIONS} ]
`;

interface LooprunSample {
  wallMs: number;
  /** Time per iteration spent outside the two commands (agent + validation durations). */
  overheadPerIterationMs: number;
}

async function looprunOnce(stack: BenchStack): Promise<LooprunSample> {
  const sessionId = `iter-${randomBytes(6).toString("hex")}`;
  const t0 = Date.now();
  const id = await submitRun(
    stack.url,
    commandRun(AGENT, TEST, { sessionId, maxIterations: ITERATIONS }),
  );
  const run = await waitForSuccess(stack.url, id, { intervalMs: 50 });
  const wallMs = Date.parse(run.finishedAt ?? "") - t0;
  if (run.metrics.iterations !== ITERATIONS) {
    throw new Error(`run ${id} took ${run.metrics.iterations} iterations, not ${ITERATIONS}`);
  }
  const its = (await api(stack.url, "GET", `/api/runs/${id}/iterations`)).body.items as {
    agent: { durationMs: number };
    validation: { durationMs: number }[];
  }[];
  const inCommands = its.reduce(
    (n, it) => n + it.agent.durationMs + it.validation.reduce((m, v) => m + v.durationMs, 0),
    0,
  );
  return { wallMs, overheadPerIterationMs: (wallMs - inCommands) / ITERATIONS };
}

async function bashOnce(): Promise<number> {
  const dir = tempDir("looprun-bench-bash-");
  try {
    writeFileSync(join(dir, "PROMPT.md"), "bench\n");
    const t0 = performance.now();
    const proc = spawnTracked("bash loop", "bash", ["-c", BASH_LOOP], {
      cwd: dir,
      env: { PATH: process.env.PATH, AGENT, TEST },
    });
    const exit = await proc.exited;
    const ms = performance.now() - t0;
    const lines = readFileSync(join(dir, "lines.txt"), "utf8").split("\n").length - 1;
    if (exit.code !== 0 || lines !== ITERATIONS) {
      throw new Error(`bash loop exited ${exit.code} with ${lines} lines: ${proc.output()}`);
    }
    return ms;
  } finally {
    removeTempDir(dir);
  }
}

/** 1. A 40-iteration run of trivial commands vs a bash loop running them 40 times. */
export async function iterationOverhead(ctx: BenchContext): Promise<ScenarioResult> {
  const stack = await startStack({ redisUrl: ctx.redis.url });
  const looprun: LooprunSample[] = [];
  const bash: number[] = [];
  try {
    await stack.startWorker();
    // Warm-up (JIT, first spawns, page cache), not recorded.
    await looprunOnce(stack);
    await bashOnce();
    for (let rep = 0; rep < ctx.reps; rep++) {
      looprun.push(await looprunOnce(stack));
      bash.push(await bashOnce());
      ctx.log(
        `  rep ${rep + 1}: looprun ${looprun.at(-1)?.wallMs.toFixed(0)} ms, bash ${bash.at(-1)?.toFixed(0)} ms`,
      );
    }
  } finally {
    await stack.stop();
  }
  const wall = looprun.map((s) => s.wallMs);
  const ratio = summarize(pairedRatios(wall, bash));
  return {
    id: "iteration-overhead",
    title: "1. Iteration overhead",
    figures: [
      {
        name: `${ITERATIONS} iterations, wall time`,
        unit: "ms",
        digits: 0,
        looprun: summarize(wall),
        baseline: { name: "bash loop", summary: summarize(bash) },
        ratio,
        goal: "≤ 1.5× bash",
        met: ratio.median <= 1.5,
      },
      {
        name: "looprun time per iteration outside the commands",
        unit: "ms",
        looprun: summarize(looprun.map((s) => s.overheadPerIterationMs)),
        baseline: {
          name: "bash (whole iteration)",
          summary: summarize(bash.map((b) => b / ITERATIONS)),
        },
      },
    ],
    notes: [
      `Agent \`${AGENT}\`, test \`${TEST}\`, cooldown 0, maxIterations ${ITERATIONS}: the run succeeds at iteration ${ITERATIONS}. One worker process (WORKER_CONCURRENCY=2, the default), LOG_LEVEL=info.`,
      "looprun is timed from just before `POST /api/runs` to the run's `finishedAt`; the bash loop from spawning `bash -c` to its exit.",
      'The bash loop runs each command as `sh -c "$CMD"` (the agent with a prompt file on stdin), as looprun does: a Ralph loop, not shell builtins.',
      '"Outside the commands" is (wall time − Σ agent and validation durations) / iterations: pickup, prompt building, the DB commits of each iteration (each a synchronous=FULL transaction), process spawning and reaping.',
      "One warm-up run of each, not recorded.",
    ],
  };
}
