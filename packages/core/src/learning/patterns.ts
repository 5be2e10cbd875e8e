import type { RunMutation } from "../engine/run-store";
import { boundedKeyPart, toolCallShape } from "./pattern-keys";

/** What earlier runs learned about one approach: a tool with an argument shape, or a command. */
export interface FailurePattern {
  /** `tool`: an MCP tool call of an agent; `command`: a validation command. */
  scope: "tool" | "command";
  /** The workspace it was seen in. */
  workspace: string;
  /** `server.tool`, or the command line. */
  subject: string;
  /** What kind of tool call (see pattern-keys.ts: argument shape, command, error kind); "" for a command. */
  shape: string;
  successes: number;
  failures: number;
  totalDurationMs: number;
  /** The latest errors, newest first. */
  lastErrors: string[];
  lastRunId: string | null;
  lastSeenAt: number;
}

/** One tool call or validation result, as a store folds it into the pattern it belongs to. */
export interface PatternObservation {
  scope: FailurePattern["scope"];
  subject: string;
  shape: string;
  ok: boolean;
  durationMs: number;
  error: string | null;
}

/** Errors kept per pattern, and the characters kept of each. */
const LAST_ERRORS_KEPT = 3;
const ERROR_CHARS = 300;

/** Where the error is in an output: its last lines (test runners end with the summary). */
function errorText(text: string): string {
  const trimmed = text.trim();
  return trimmed.length > ERROR_CHARS ? `…${trimmed.slice(-ERROR_CHARS)}` : trimmed;
}

/**
 * What a mutation teaches: its tool calls, and the validation results of an iteration it
 * decides (written once, with the iteration's final status).
 */
export function observationsOf(m: RunMutation): PatternObservation[] {
  const seen: PatternObservation[] = [];
  for (const call of m.toolCalls ?? []) {
    seen.push({
      scope: "tool",
      subject: boundedKeyPart(`${call.server}.${call.tool}`),
      shape: toolCallShape(call),
      ok: !call.isError,
      durationMs: call.durationMs,
      error: call.isError ? errorText(call.result) : null,
    });
  }
  const patch = m.updateIteration?.patch;
  if (patch?.validation && (patch.status === "passed" || patch.status === "failed")) {
    for (const v of patch.validation) {
      const ok = v.exitCode === 0;
      seen.push({
        scope: "command",
        subject: boundedKeyPart(v.command),
        shape: "",
        ok,
        durationMs: v.durationMs,
        error: ok ? null : errorText(`exit ${v.exitCode ?? "killed"}: ${v.output}`),
      });
    }
  }
  return seen;
}

/** The observations of one mutation merged per pattern (the unit a store upserts). */
export interface PatternDelta {
  scope: FailurePattern["scope"];
  subject: string;
  shape: string;
  successes: number;
  failures: number;
  totalDurationMs: number;
  /** Newest first. */
  errors: string[];
}

export function patternKey(p: { scope: string; subject: string; shape: string }): string {
  return JSON.stringify([p.scope, p.subject, p.shape]);
}

/**
 * The observations merged per pattern, ordered by `patternKey` (code-unit order, the same in
 * every process). Stores upsert a commit's deltas in this order: two commits touching the same
 * rows then lock them in the same order and wait for each other instead of deadlocking
 * (PostgreSQL 40P01).
 */
export function patternDeltas(observations: readonly PatternObservation[]): PatternDelta[] {
  const byKey = new Map<string, PatternDelta>();
  for (const o of observations) {
    const key = patternKey(o);
    let d = byKey.get(key);
    if (!d) {
      d = {
        scope: o.scope,
        subject: o.subject,
        shape: o.shape,
        successes: 0,
        failures: 0,
        totalDurationMs: 0,
        errors: [],
      };
      byKey.set(key, d);
    }
    if (o.ok) d.successes += 1;
    else d.failures += 1;
    d.totalDurationMs += Math.max(0, Math.round(o.durationMs));
    if (o.error !== null) d.errors.unshift(o.error);
  }
  return [...byKey.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, d]) => d);
}

/** A pattern's last errors after a delta: the delta's (newest) first, capped. */
function mergeLastErrors(previous: readonly string[], delta: PatternDelta): string[] {
  return [...delta.errors, ...previous].slice(0, LAST_ERRORS_KEPT);
}

/** A pattern with a delta folded in (how every store updates one). */
export function foldPattern(
  existing: FailurePattern | null,
  workspace: string,
  delta: PatternDelta,
  runId: string,
  now: number,
): FailurePattern {
  return {
    scope: delta.scope,
    workspace,
    subject: delta.subject,
    shape: delta.shape,
    successes: (existing?.successes ?? 0) + delta.successes,
    failures: (existing?.failures ?? 0) + delta.failures,
    totalDurationMs: (existing?.totalDurationMs ?? 0) + delta.totalDurationMs,
    lastErrors: mergeLastErrors(existing?.lastErrors ?? [], delta),
    lastRunId: runId,
    lastSeenAt: now,
  };
}

/** The order a store returns a workspace's patterns in: most failures, then most recent. */
export function byFailuresThenRecency(a: FailurePattern, b: FailurePattern): number {
  return b.failures - a.failures || b.lastSeenAt - a.lastSeenAt;
}

/**
 * Patterns a workspace keeps (one per command line and error kind would grow without bound);
 * stores drop the least recently seen beyond it.
 */
export const MAX_PATTERNS_PER_WORKSPACE = 1000;

/** Patterns of each kind a prompt is chosen from (see `promptCandidates`). */
export const PATTERNS_FOR_PROMPT = 50;
