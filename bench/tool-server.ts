import { existsSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { BenchContext } from "./support/context";
import { looprunRootDir } from "./support/looprun";
import { removeTempDir, rssMb, tempDir } from "./support/processes";
import { fmtRatio, type ScenarioResult } from "./support/report";
import { pairedRatios, summarize } from "./support/stats";

/**
 * 7. The workspace MCP server a worker starts for each iteration of a mistral agent: from
 * looprun's bundle (as workers start it) against the same sources through tsx (as before).
 * Not one of #8's goals: the figures behind the README's words.
 */

interface Start {
  /** Spawn → MCP initialize → the tool list received. */
  ms: number;
  /** The server's RSS once it has listed its tools. */
  rssMb: number;
}

type Launch = { command: string; args: string[] };

/** The bundle's entry (apps/cli/bin/bundle.js builds it as the CLI's server commands do). */
async function bundledLaunch(root: string): Promise<Launch> {
  const { bundle } = await import(pathToFileURL(join(root, "apps/cli/bin/bundle.js")).href);
  const main: string | null = await bundle(pathToFileURL(join(root, "apps/cli/src/main.ts")));
  const entry = main === null ? null : fileURLToPath(new URL("./workspace-server.js", main));
  if (entry === null || !existsSync(entry)) {
    throw new Error(`the bundle of ${root} has no workspace-server.js`);
  }
  return { command: process.execPath, args: [entry] };
}

function tsxLaunch(root: string): Launch {
  const tsx = createRequire(join(root, "package.json")).resolve("tsx");
  const entry = join(root, "packages/core/src/tools/workspace-server-main.ts");
  return { command: process.execPath, args: ["--import", pathToFileURL(tsx).href, entry] };
}

async function startOnce(launch: Launch, dir: string): Promise<Start> {
  const t0 = performance.now();
  const transport = new StdioClientTransport({
    command: launch.command,
    args: [...launch.args, dir],
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    stderr: "pipe",
  });
  const client = new Client({ name: "looprun-bench", version: "0" });
  try {
    await client.connect(transport);
    const { tools } = await client.listTools();
    const ms = performance.now() - t0;
    if (!tools.some((t) => t.name === "read_text_file")) {
      throw new Error(`unexpected tools: ${tools.map((t) => t.name).join(", ")}`);
    }
    const pid = transport.pid;
    if (pid === null) throw new Error("the server has no pid");
    return { ms, rssMb: rssMb(pid) };
  } finally {
    await client.close();
  }
}

export async function toolServer(ctx: BenchContext): Promise<ScenarioResult> {
  const root = looprunRootDir();
  const bundled = await bundledLaunch(root);
  const tsx = tsxLaunch(root);
  const dir = tempDir("looprun-bench-tools-");
  writeFileSync(join(dir, "README.md"), "bench\n");
  const starts = 3 * ctx.reps;
  const b: Start[] = [];
  const t: Start[] = [];
  try {
    // Once each first: the page cache and the bundle's directory are warm for both.
    await startOnce(bundled, dir);
    await startOnce(tsx, dir);
    for (let i = 0; i < starts; i++) {
      b.push(await startOnce(bundled, dir));
      t.push(await startOnce(tsx, dir));
    }
  } finally {
    removeTempDir(dir);
  }
  const ms = pairedRatios(
    b.map((s) => s.ms),
    t.map((s) => s.ms),
  );
  const mb = pairedRatios(
    b.map((s) => s.rssMb),
    t.map((s) => s.rssMb),
  );
  ctx.log(
    `  start ${summarize(b.map((s) => s.ms)).median.toFixed(0)} ms vs ${summarize(t.map((s) => s.ms)).median.toFixed(0)} ms through tsx (${fmtRatio(summarize(ms))})`,
  );
  return {
    id: "tool-server",
    title: "7. Workspace tool server start (not an issue goal)",
    figures: [
      {
        name: "spawn → tools listed",
        unit: "ms",
        digits: 0,
        looprun: summarize(b.map((s) => s.ms)),
        baseline: { name: "the same sources through tsx", summary: summarize(t.map((s) => s.ms)) },
        ratio: summarize(ms),
      },
      {
        name: "its RSS once it has listed its tools",
        unit: "MB",
        digits: 0,
        looprun: summarize(b.map((s) => s.rssMb)),
        baseline: {
          name: "the same sources through tsx",
          summary: summarize(t.map((s) => s.rssMb)),
        },
        ratio: summarize(mb),
      },
    ],
    notes: [
      `${starts} starts each, alternating, after one of each not counted; each through the MCP SDK's stdio client as a worker's ToolHub starts it: spawn, initialize, tools/list, then close.`,
      "looprun's side is `node workspace-server.js DIR` from the bundle apps/cli/bin/bundle.js builds (what workers run); the baseline is `node --import tsx workspace-server-main.ts DIR` (what they ran before, and what tests importing the sources still run).",
    ],
  };
}
