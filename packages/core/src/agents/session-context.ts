import { baseToolName } from "../tools/tool-names";

/** An earlier run of the same session, as the agent is told about it. */
export interface SessionRunSummary {
  runId: string;
  task: string;
  status: string;
  reason: string | null;
  summary: string | null;
  filesTouched: string[];
}

/** A failed tool call of this run, so the model does not repeat it. */
export interface ToolFailure {
  iteration: number;
  /** The tool's server ("" when the model named a tool that does not exist). */
  server: string;
  /** The tool's name on its server. */
  tool: string;
  args: unknown;
  error: string;
}

export function renderSessionHistory(runs: readonly SessionRunSummary[]): string {
  return runs
    .map((r) => {
      const files =
        r.filesTouched.length > 0 ? `; files touched: ${r.filesTouched.join(", ")}` : "";
      return `- run ${r.runId}: "${r.task}" → ${r.status}${r.reason ? ` (${r.reason})` : ""}${files}`;
    })
    .join("\n");
}

export function renderToolFailures(failures: readonly ToolFailure[]): string {
  return failures
    .map(
      (f) =>
        `- iteration ${f.iteration}: ${f.server === "" ? f.tool : baseToolName(f.server, f.tool)}(${JSON.stringify(f.args).slice(0, 300)}) failed: ${f.error.slice(0, 300)}`,
    )
    .join("\n");
}
