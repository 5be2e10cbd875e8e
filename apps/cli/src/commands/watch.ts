import type { ApiClient } from "../api-client";

interface RunView {
  id: string;
  status: string;
  reason: string | null;
  summary: string | null;
  iteration: number;
  progress: string | null;
  budget: { maxIterations: number; elapsedMs: number; remainingIterations: number };
}
interface EventView {
  seq: number;
  type: string;
  data: Record<string, unknown>;
}

const TERMINAL = new Set(["succeeded", "failed", "stopped"]);

function describe(e: EventView): string {
  const d = e.data as Record<string, unknown> & { results?: { command: string; exitCode: number | null }[] };
  switch (e.type) {
    case "iteration_started":
      return `iteration ${d.iteration} started${Number(d.attempt) > 1 ? ` (attempt ${d.attempt})` : ""}`;
    case "agent_finished":
      return `agent exited ${d.exitCode} after ${d.durationMs} ms`;
    case "validation_passed":
    case "validation_failed":
      return `${e.type.replace("_", " ")}: ${(d.results ?? []).map((r) => `${r.command} → ${r.exitCode}`).join(", ")}`;
    case "cooldown_started":
      return `cooling down ${d.cooldownMs} ms`;
    case "budget_exhausted":
      return `budget exhausted (${d.reason})`;
    case "run_finished":
      return `finished: ${d.status} (${d.reason}) — ${d.summary}`;
    default:
      return e.type.replaceAll("_", " ");
  }
}

const clock = (ms: number) => {
  const s = Math.floor(ms / 1000);
  return `${String(Math.floor(s / 60)).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}`;
};

/** Prints a run's events as progress lines until it finishes; resolves with its final view. */
export async function watchRun(client: ApiClient, id: string, out = process.stdout): Promise<RunView> {
  let after = 0;
  for (;;) {
    const { items } = await client.request<{ items: EventView[] }>("GET", `/api/runs/${id}/events?after=${after}`);
    const run = await client.request<RunView>("GET", `/api/runs/${id}`);
    for (const e of items) {
      after = e.seq;
      const budget = e.data.budget as { elapsedMs?: number } | undefined;
      const n = typeof e.data.iteration === "number" ? `${e.data.iteration}/${run.budget.maxIterations} ` : "";
      out.write(`[${clock(budget?.elapsedMs ?? 0)}] ${n}${describe(e)}\n`);
    }
    if (TERMINAL.has(run.status) && items.length === 0) return run;
    await new Promise((r) => setTimeout(r, 400));
  }
}
