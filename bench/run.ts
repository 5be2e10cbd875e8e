import { join, resolve } from "node:path";
import { historyAtScale, historyAtScalePostgres } from "./history";
import { iterationOverhead } from "./iteration-overhead";
import { memory } from "./memory";
import { pickupLatency } from "./pickup-latency";
import { scaleOut } from "./scale-out";
import { submitPath, submitPathPostgres } from "./submit-path";
import type { BenchContext } from "./support/context";
import { setLooprunRoot, setProfileDir } from "./support/looprun";
import { load1, machineInfo } from "./support/machine";
import { stopBenchPostgres } from "./support/postgres";
import { killEverything, REPO_ROOT, recentOutputs, stopEverything } from "./support/processes";
import { startRedis } from "./support/redis";
import { type ScenarioResult, textTable, writeResults } from "./support/report";
import { toolServer } from "./tool-server";

const SCENARIOS: Record<string, (ctx: BenchContext) => Promise<ScenarioResult>> = {
  "iteration-overhead": iterationOverhead,
  "submit-path": submitPath,
  "submit-path-postgres": submitPathPostgres,
  "pickup-latency": pickupLatency,
  "scale-out": scaleOut,
  history: historyAtScale,
  "history-postgres": historyAtScalePostgres,
  memory,
  "tool-server": toolServer,
};

const USAGE = `usage: npm run bench -- [--quick] [--reps N] [--only a,b] [--out FILE] [--root DIR] [--profile DIR]
  --quick        a short pass (fewer repetitions, smaller data); writes bench/.data/RESULTS-quick.md
  --reps N       repetitions per figure (default 5, --quick 2)
  --only a,b     scenarios to run (default all): ${Object.keys(SCENARIOS).join(", ")}
  --out FILE     where to write the results (default bench/RESULTS.md; bench/.data/… for
                 --quick, --only or --root runs, so that they do not replace the full results)
  --root DIR     run the API and workers of another checkout (a before/after comparison)
  --profile DIR  run the API and workers with node --cpu-prof, profiles into DIR`;

interface Options {
  quick: boolean;
  reps: number;
  only: string[];
  out: string;
  root: string;
  profile: string;
}

function parseArgs(argv: string[]): Options {
  const opts: Options = {
    quick: false,
    reps: 0,
    only: Object.keys(SCENARIOS),
    out: "",
    root: "",
    profile: "",
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value\n${USAGE}`);
      return v;
    };
    if (arg === "--quick") opts.quick = true;
    else if (arg === "--reps") opts.reps = Number(value());
    else if (arg === "--only") opts.only = value().split(",");
    else if (arg === "--out") opts.out = resolve(value());
    else if (arg === "--root") opts.root = resolve(value());
    else if (arg === "--profile") opts.profile = resolve(value());
    else if (arg === "--help" || arg === "-h") {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    } else throw new Error(`unknown argument ${arg}\n${USAGE}`);
  }
  for (const name of opts.only)
    if (!(name in SCENARIOS)) throw new Error(`unknown scenario ${name}\n${USAGE}`);
  if (!Number.isInteger(opts.reps) || opts.reps < 0)
    throw new Error("--reps must be a positive integer");
  opts.reps ||= opts.quick ? 2 : 5;
  const partial = opts.only.length < Object.keys(SCENARIOS).length;
  const scratch = opts.quick || partial || opts.root !== "" || opts.profile !== "";
  opts.out ||= join(
    REPO_ROOT,
    scratch ? `bench/.data/RESULTS-${opts.quick ? "quick" : "partial"}.md` : "bench/RESULTS.md",
  );
  return opts;
}

async function main(): Promise<void> {
  const opts = parseArgs(process.argv.slice(2));
  const startedAt = new Date();
  const machine = machineInfo(opts.root || REPO_ROOT);
  const log = (message: string) => process.stderr.write(`${message}\n`);
  log(
    `looprun bench (${opts.quick ? "quick" : "full"}, ${opts.reps} reps) on ${machine.cpu}, ${machine.cores} cores, node ${machine.node}; load ${machine.loadAvg.map((l) => l.toFixed(2)).join(" ")}`,
  );
  if (opts.root) setLooprunRoot(opts.root);
  if (opts.profile) setProfileDir(opts.profile);
  const redis = await startRedis();
  const ctx: BenchContext = { quick: opts.quick, reps: opts.reps, redis, log };
  const results: ScenarioResult[] = [];
  for (const name of opts.only) {
    const scenario = SCENARIOS[name];
    if (!scenario) continue;
    log(`\n${name} (load ${load1().toFixed(2)})`);
    const before = load1();
    const t0 = performance.now();
    const result = await scenario(ctx);
    result.durationMs = performance.now() - t0;
    result.load = { before, after: load1() };
    results.push(result);
    log(`${name} done in ${(result.durationMs / 1000).toFixed(0)} s`);
  }
  await stopEverything();
  await stopBenchPostgres();
  const durationMs = Date.now() - startedAt.getTime();
  process.stdout.write(`\n${textTable(results)}\n`);
  writeResults(
    opts.out,
    {
      machine,
      quick: opts.quick,
      reps: opts.reps,
      startedAt,
      durationMs,
      root: opts.root || REPO_ROOT,
    },
    results,
  );
  process.stdout.write(`\nwritten to ${opts.out}\n`);
}

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    killEverything();
    void stopBenchPostgres()
      .catch(() => {})
      .finally(() => process.exit(130));
  });
}

main().catch(async (error: unknown) => {
  process.stderr.write(
    `bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.stderr.write(`output of the processes started last:\n${recentOutputs()}\n`);
  await stopEverything().catch(() => killEverything());
  await stopBenchPostgres().catch(() => {});
  process.exit(1);
});
