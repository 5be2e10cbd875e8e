import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildCommandEnv } from "@looprun/core";
import type { BenchContext } from "./support/context";
import {
  api,
  type BenchStack,
  commandRun,
  startStack,
  submitRun,
  waitForSuccess,
} from "./support/looprun";
import { baseEnv, removeTempDir, spawnTracked, spawnTs, tempDir } from "./support/processes";
import { fmtRatio, type ScenarioResult } from "./support/report";
import { pairedRatios, summarize } from "./support/stats";

const ITERATIONS = 40;
/**
 * Runs between the measured ones and the warm ones: V8 optimises functions an iteration runs
 * well into a worker's first thousand iterations (on its background threads, beside the
 * commands; still a few a run after that — bench/RESULTS.md, the thirty-ninth session).
 */
const WARMING_RUNS = { full: 25, quick: 10 };
const AGENT = "echo line >> lines.txt";
const TEST = `[ "$(wc -l < lines.txt)" -ge ${ITERATIONS} ]`;

/**
 * The environment looprun's worker gives its commands, from the one the bench's stack starts
 * with: the baselines run theirs in it too (with the locale: `wc` in C.UTF-8 made the bash
 * loop ~5 ms slower than in the C locale they had before — bench/RESULTS.md, the fortieth session).
 */
const COMMAND_ENV = buildCommandEnv(baseEnv(), []);

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
  /** POST → the first iteration's start: pickup, claim, start (and whatever runs before it). */
  beforeFirstMs: number;
  /** Per iteration: the agent and test commands, as looprun times them (spawn to reaped). */
  commandsMs: number;
  /** Per iteration: inside it but outside the commands (prompt, commits, snapshot, decision). */
  engineMs: number;
  /** Per iteration: from one iteration's end to the next one's start. */
  betweenMs: number;
}

interface IterationView {
  startedAt: string;
  finishedAt: string;
  agent: { durationMs: number };
  validation: { durationMs: number }[];
}

const NODE_LOOP_NAMES: Record<NodeLoopMode, string> = {
  spawn: "node loop (2 spawns, nothing stored)",
  posix: "node loop, posix_spawn (nothing stored)",
  "posix-commit": "node loop, posix_spawn, 1 commit/iteration",
};

export async function looprunOnce(stack: BenchStack): Promise<LooprunSample> {
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
  const its = (await api(stack.url, "GET", `/api/runs/${id}/iterations`)).body
    .items as IterationView[];
  let commands = 0;
  let inside = 0;
  let between = 0;
  its.forEach((it, i) => {
    const c = it.agent.durationMs + it.validation.reduce((m, v) => m + v.durationMs, 0);
    commands += c;
    inside += Date.parse(it.finishedAt) - Date.parse(it.startedAt) - c;
    const next = its[i + 1];
    if (next) between += Date.parse(next.startedAt) - Date.parse(it.finishedAt);
  });
  return {
    wallMs,
    beforeFirstMs: Date.parse(its[0]?.startedAt ?? "") - t0,
    commandsMs: commands / ITERATIONS,
    engineMs: inside / ITERATIONS,
    betweenMs: between / (ITERATIONS - 1),
  };
}

export async function bashOnce(): Promise<number> {
  const dir = tempDir("looprun-bench-bash-");
  try {
    writeFileSync(join(dir, "PROMPT.md"), "bench\n");
    const t0 = performance.now();
    const proc = spawnTracked("bash loop", "bash", ["-c", BASH_LOOP], {
      cwd: dir,
      env: { ...COMMAND_ENV, AGENT, TEST },
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

/** How the node loop spawns its commands, and whether it stores anything (see node-loop.ts). */
export type NodeLoopMode = "spawn" | "posix" | "posix-commit";
const NODE_MODES: readonly NodeLoopMode[] = ["spawn", "posix", "posix-commit"];

/** The same loop in a plain Node process (bench/baselines/node-loop.ts): the loop's own time. */
export async function nodeOnce(mode: NodeLoopMode = "spawn"): Promise<number> {
  const dir = tempDir("looprun-bench-node-");
  try {
    const proc = spawnTs(`node loop (${mode})`, "bench/baselines/node-loop.ts", {
      AGENT,
      TEST,
      ITERATIONS: String(ITERATIONS),
      COMMAND_ENV: JSON.stringify(COMMAND_ENV),
      DIR: dir,
      MODE: mode,
    });
    const exit = await proc.exited;
    const line = proc.output().trim().split("\n").at(-1) ?? "";
    const result = JSON.parse(line) as { ms: number; iterations: number };
    if (exit.code !== 0 || result.iterations !== ITERATIONS) {
      throw new Error(`node loop (${mode}) exited ${exit.code}: ${proc.output()}`);
    }
    return result.ms;
  } finally {
    removeTempDir(dir);
  }
}

/** The per-iteration breakdown of `samples` against their bash loop runs (`when`: which runs). */
function perIteration(samples: LooprunSample[], bash: number[], when: string) {
  const name = (what: string) => `looprun breakdown per iteration${when}: ${what}`;
  return [
    {
      name: name("the two commands"),
      unit: "ms",
      looprun: summarize(samples.map((x) => x.commandsMs)),
      baseline: {
        name: "bash (whole iteration)",
        summary: summarize(bash.map((x) => x / ITERATIONS)),
      },
    },
    {
      name: name("engine inside the iteration"),
      unit: "ms",
      looprun: summarize(samples.map((x) => x.engineMs)),
    },
    {
      name: name("between iterations"),
      unit: "ms",
      looprun: summarize(samples.map((x) => x.betweenMs)),
    },
  ];
}

/** 1. A 40-iteration run of trivial commands vs a bash loop running them 40 times. */
export async function iterationOverhead(ctx: BenchContext): Promise<ScenarioResult> {
  const stack = await startStack({ redisUrl: ctx.redis.url });
  const looprun: LooprunSample[] = [];
  const bash: number[] = [];
  const node: Record<NodeLoopMode, number[]> = { spawn: [], posix: [], "posix-commit": [] };
  // The same worker once it has run a while, as a long-lived one is: against the bash loop again.
  const warm: LooprunSample[] = [];
  const warmBash: number[] = [];
  const warming = ctx.quick ? WARMING_RUNS.quick : WARMING_RUNS.full;
  try {
    await stack.startWorker();
    // Warm-up (JIT, first spawns, page cache), not recorded.
    await looprunOnce(stack);
    await bashOnce();
    for (const mode of NODE_MODES) await nodeOnce(mode);
    for (let rep = 0; rep < ctx.reps; rep++) {
      looprun.push(await looprunOnce(stack));
      bash.push(await bashOnce());
      for (const mode of NODE_MODES) node[mode].push(await nodeOnce(mode));
      const loops = NODE_MODES.map((m) => `${m} ${node[m].at(-1)?.toFixed(0)}`).join(", ");
      ctx.log(
        `  rep ${rep + 1}: looprun ${looprun.at(-1)?.wallMs.toFixed(0)} ms, bash ${bash.at(-1)?.toFixed(0)} ms, node loops ${loops} ms`,
      );
    }
    for (let run = 0; run < warming; run++) await looprunOnce(stack);
    for (let rep = 0; rep < ctx.reps; rep++) {
      warm.push(await looprunOnce(stack));
      warmBash.push(await bashOnce());
      ctx.log(
        `  warm rep ${rep + 1}: looprun ${warm.at(-1)?.wallMs.toFixed(0)} ms, bash ${warmBash.at(-1)?.toFixed(0)} ms`,
      );
    }
  } finally {
    await stack.stop();
  }
  const wall = looprun.map((s) => s.wallMs);
  const ratio = summarize(pairedRatios(wall, bash));
  const againstNode = (mode: NodeLoopMode, name: string) => ({
    name: `${ITERATIONS} iterations, wall time, against ${name}`,
    unit: "ms",
    digits: 0,
    looprun: summarize(wall),
    baseline: { name: NODE_LOOP_NAMES[mode], summary: summarize(node[mode]) },
    ratio: summarize(pairedRatios(wall, node[mode])),
  });
  const floor = (mode: NodeLoopMode) => summarize(pairedRatios(node[mode], bash));
  const warmWall = warm.map((s) => s.wallMs);
  const warmAfter = `warm (after ${((1 + ctx.reps + warming) * ITERATIONS).toLocaleString("en")} iterations)`;
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
        name: `${ITERATIONS} iterations, wall time, ${warmAfter}`,
        unit: "ms",
        digits: 0,
        looprun: summarize(warmWall),
        baseline: { name: "bash loop", summary: summarize(warmBash) },
        ratio: summarize(pairedRatios(warmWall, warmBash)),
      },
      againstNode("spawn", "the same loop in plain Node"),
      againstNode("posix", "a Node loop whose commands posix_spawn spawns"),
      againstNode("posix-commit", "that loop with one durable commit per iteration"),
      {
        name: "looprun breakdown: POST → first iteration starts",
        unit: "ms",
        looprun: summarize(looprun.map((x) => x.beforeFirstMs)),
      },
      ...perIteration(looprun, bash, ""),
      ...perIteration(warm, warmBash, `, ${warmAfter}`),
    ],
    notes: [
      `Agent \`${AGENT}\`, test \`${TEST}\`, cooldown 0, maxIterations ${ITERATIONS}: the run succeeds at iteration ${ITERATIONS}. One worker process (WORKER_CONCURRENCY=2, the default), LOG_LEVEL=info.`,
      "looprun is timed from just before `POST /api/runs` to the run's `finishedAt`; the bash loop from spawning `bash -c` to its exit.",
      'The bash loop runs each command as `sh -c "$CMD"` (the agent with a prompt file on stdin), as looprun does: a Ralph loop, not shell builtins.',
      `The baselines run their commands in the environment looprun's worker gives its commands, from the one the stack starts with (${Object.keys(COMMAND_ENV).sort().join(", ")}).`,
      "The breakdown comes from the stored iterations (whole milliseconds): the commands are the agent's and the test's durations as looprun records them (from spawn until the process group is reaped); \"engine inside the iteration\" is the rest of each iteration's startedAt → finishedAt: the prompt, the DB commits of the iteration (the worker's are synchronous=NORMAL: in WAL mode they survive the worker's crash at once and a power loss from the next checkpoint), the workspace snapshot (git) and the decision; \"between iterations\" is one iteration's finishedAt to the next one's startedAt.",
      "The node loops (bench/baselines/node-loop.ts) run the same two commands the same way (own process group, the prompt on stdin) from a plain Node process, timed from the first command to the last one's exit, for context (no goal): `spawn` spawns them with Node's child_process (which forks the Node process); `posix` through posix_spawn, with the addon looprun's workers use (packages/spawn) called directly, the least spawning from Node costs; `posix-commit` adds one durable SQLite commit per iteration (WAL, synchronous=FULL, one row), the least a runner that keeps its history writes.",
      `Against the bash loop, in this run: the spawn loop ${fmtRatio(floor("spawn"))}, the posix_spawn loop ${fmtRatio(floor("posix"))}, the posix_spawn loop with a commit per iteration ${fmtRatio(floor("posix-commit"))}.`,
      "One warm-up run of each, not recorded.",
      `Warm: the same worker, after ${warming} more runs not recorded (nearer a long-lived worker's steady state: V8 optimises functions an iteration runs well into a worker's first thousand iterations, on its background threads, beside the commands); each warm run paired with a bash loop run after it. The goal is read on the first figure.`,
    ],
  };
}
