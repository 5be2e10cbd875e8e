import { existsSync } from "node:fs";
import { join } from "node:path";
import type { EventRecord, EventType, RunRecord } from "@looprun/core";
import { MemoryRunStore } from "@looprun/core/testing";
import { afterEach, beforeEach, expect } from "vitest";
import { makeRun, readPids, removeDir, tempDir } from "./support";

/** A fresh workspace and memory store per test (read through `engine.ws` / `engine.store`). */
export const engine = { ws: "", store: new MemoryRunStore() };
export function useEngineFixture(): void {
  beforeEach(async () => {
    engine.ws = await tempDir("looprun-ws-");
    engine.store = new MemoryRunStore();
  });
  afterEach(async () => {
    await removeDir(engine.ws);
  });
}

/** Creates a, b, c — one per iteration — and keeps the prompt it got. */
export const FIXER =
  'cat > "stdin-$LOOPRUN_ITERATION.txt"; env > "env-$LOOPRUN_ITERATION.txt"; ' +
  "for f in a b c; do if [ ! -f $f ]; then touch $f; echo fixed $f; break; fi; done";
/** Fails, naming what is missing, until a, b and c exist. */
export const CHECK =
  'missing=""; for f in a b c; do [ -f $f ] || missing="$missing $f"; done; ' +
  'if [ -n "$missing" ]; then echo "CHECK-FAILED missing:$missing"; exit 1; fi; echo all-good';

export function seed(body: Record<string, unknown>): RunRecord {
  const run = makeRun(body, engine.ws);
  engine.store.add(run);
  return run;
}

export function types(events: EventRecord[]): EventType[] {
  return events.map((e) => e.type);
}

export function expectEventInvariants(events: EventRecord[]): void {
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  for (const e of events) {
    expect(e.data.budget, `budget of ${e.type}`).toEqual(
      expect.objectContaining({
        elapsedMs: expect.any(Number),
        remainingIterations: expect.any(Number),
      }),
    );
  }
  // Every agent_started has its agent_finished before the next iteration or the run's end.
  let agentRunning: EventRecord | null = null;
  for (const e of events) {
    if (e.type === "agent_started") agentRunning = e;
    else if (e.type === "agent_finished") agentRunning = null;
    else if (e.type === "iteration_started" || e.type === "run_finished") {
      expect(agentRunning, `the agent_finished of event ${agentRunning?.seq}`).toBeNull();
    }
  }
}

/** An agent that records its pid and a background child's, then waits (until killed). */
export const BLOCKING_AGENT = "echo $$ > agent.pids; sleep 30 & echo $! >> agent.pids; wait";
export const agentPidsWritten = () =>
  existsSync(join(engine.ws, "agent.pids")) && readPids(join(engine.ws, "agent.pids")).length === 2;
