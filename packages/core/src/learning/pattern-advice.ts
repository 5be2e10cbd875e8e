import { boundedKeyPart, functionName, parseToolShape, type ToolShape } from "./pattern-keys";
import { byFailuresThenRecency, type FailurePattern, patternKey } from "./patterns";

/*
 * When a pattern is advice. One failure is an incident, not a pattern: an agent reads a file
 * that is not there, runs the tests before fixing them. A pattern is told as "failed before"
 * only when it failed at least twice and at least half of its calls (a tool that failed 1 time
 * in 200 works). Commands (`run_command` by command, validation commands) need 4 failures in
 * 5: an agent runs the tests before and after its fix, so a working test command fails about
 * half the time (fail, pass; fail, fail, pass) — only a command that almost never passes
 * (`yarn test` without yarn) is an approach to change. What worked is what succeeded with at
 * most 1 failure in 5.
 */
const ADVISE_MIN_FAILURES = 2;
const ADVISE_MIN_RATIO = 0.5;
const COMMAND_ADVISE_MIN_RATIO = 0.8;
const WORKED_MAX_RATIO = 0.2;

/** Lines of each kind a prompt receives. */
const FAILED_SHOWN = 5;
const WORKED_SHOWN = 3;

/** What a pattern is, for advice. */
type Kind = { kind: "validation" } | ToolShape;

function kindOf(p: FailurePattern): Kind {
  return p.scope === "command" ? { kind: "validation" } : parseToolShape(p.subject, p.shape);
}

interface Weighed {
  pattern: FailurePattern;
  kind: Kind;
  /** The calls the pattern's failures are weighed against. */
  calls: number;
  ratio: number;
}

/**
 * Each pattern with the calls its failures count against: its own, or for a tool's calls or
 * error kinds all calls of the tool with that argument shape among `patterns` (its own too).
 */
function weigh(patterns: readonly FailurePattern[]): Weighed[] {
  const ofShape = new Map<string, { calls: number; failures: number }>();
  const shapeKey = (subject: string, shape: string) => JSON.stringify([subject, shape]);
  const kinded = patterns.map((pattern) => ({ pattern, kind: kindOf(pattern) }));
  for (const { pattern: p, kind } of kinded) {
    if (kind.kind !== "calls" && kind.kind !== "error") continue;
    const key = shapeKey(p.subject, kind.shape);
    const sum = ofShape.get(key) ?? { calls: 0, failures: 0 };
    ofShape.set(key, {
      calls: sum.calls + p.successes + p.failures,
      failures: sum.failures + p.failures,
    });
  }
  return kinded.map(({ pattern, kind }) => {
    const own = { calls: pattern.successes + pattern.failures, failures: pattern.failures };
    if (kind.kind !== "error" && kind.kind !== "calls") {
      return { pattern, kind, calls: own.calls, ratio: own.failures / Math.max(1, own.calls) };
    }
    // Counted above with the pattern itself: `own` only where the map cannot say so to types.
    const shape = ofShape.get(shapeKey(pattern.subject, kind.shape)) ?? own;
    // An error kind is weighed by its own failures; the shape's calls by all of theirs.
    const failures = kind.kind === "error" ? own.failures : shape.failures;
    return { pattern, kind, calls: shape.calls, ratio: failures / Math.max(1, shape.calls) };
  });
}

function isCommand(kind: Kind): boolean {
  return kind.kind === "command" || kind.kind === "validation";
}

function failedBefore(w: Weighed): boolean {
  if (w.kind.kind === "legacy_command") return false;
  const minRatio = isCommand(w.kind) ? COMMAND_ADVISE_MIN_RATIO : ADVISE_MIN_RATIO;
  return w.pattern.failures >= ADVISE_MIN_FAILURES && w.ratio >= minRatio;
}

function workedBefore(w: Weighed): boolean {
  return (
    // A tool's kinds (validation commands are not told as what worked).
    (w.kind.kind === "calls" || w.kind.kind === "command") &&
    w.pattern.successes > 0 &&
    w.ratio <= WORKED_MAX_RATIO
  );
}

/**
 * The patterns worth telling an agent: what keeps failing (see the thresholds above; highest
 * failure ratio, then most failures, then most recent) and what worked (most successes).
 */
function relevant(patterns: readonly FailurePattern[]): { failed: Weighed[]; worked: Weighed[] } {
  const weighed = weigh(patterns);
  const failed = weighed
    .filter(failedBefore)
    .sort(
      (a, b) =>
        b.ratio - a.ratio ||
        b.pattern.failures - a.pattern.failures ||
        b.pattern.lastSeenAt - a.pattern.lastSeenAt,
    )
    .slice(0, FAILED_SHOWN);
  const worked = weighed
    .filter(workedBefore)
    .sort(
      (a, b) =>
        b.pattern.successes - a.pattern.successes || b.pattern.lastSeenAt - a.pattern.lastSeenAt,
    )
    .slice(0, WORKED_SHOWN);
  return { failed, worked };
}

/**
 * The patterns a prompt is chosen from, as every store selects them: up to `limit` that
 * failed at least half their calls (highest ratio, then most failures first; single failures
 * too, since they count against the calls of their tool) and, chosen apart, up to `limit`
 * with the most successes — what worked, and the calls an error kind is weighed against.
 * Most failures first, then most recent.
 */
export function promptCandidates(
  patterns: readonly FailurePattern[],
  limit: number,
): FailurePattern[] {
  const ratio = (p: FailurePattern) => p.failures / Math.max(1, p.failures + p.successes);
  const failing = patterns
    .filter((p) => p.failures > 0 && p.failures >= p.successes)
    .sort((a, b) => ratio(b) - ratio(a) || byFailuresThenRecency(a, b))
    .slice(0, limit);
  const succeeding = patterns
    .filter((p) => p.successes > 0)
    .sort((a, b) => b.successes - a.successes || b.lastSeenAt - a.lastSeenAt)
    .slice(0, limit);
  return mergeCandidates(failing, succeeding);
}

/** The two selections of `promptCandidates` as one list (a pattern in both once). */
export function mergeCandidates(
  failing: readonly FailurePattern[],
  succeeding: readonly FailurePattern[],
): FailurePattern[] {
  const byKey = new Map<string, FailurePattern>();
  for (const p of [...failing, ...succeeding]) byKey.set(patternKey(p), p);
  return [...byKey.values()].sort(byFailuresThenRecency);
}

function label(w: Weighed): string {
  const tool = `tool \`${functionName(w.pattern.subject)}\``;
  switch (w.kind.kind) {
    case "validation":
      return `command \`${w.pattern.subject}\``;
    case "command":
      return `${tool} with command \`${w.kind.command}\``;
    case "calls":
      return `${tool} with ${w.kind.shape}`;
    case "error":
      return `${tool} with ${w.kind.shape} failing with "${w.kind.error}"`;
    case "legacy_command":
      return tool;
  }
}

function meanMs(p: FailurePattern): number {
  return Math.round(p.totalDurationMs / Math.max(1, p.successes + p.failures));
}

/** Whether a pattern is one of the run's own checks: a gate command, or the agent running one. */
function isGate(w: Weighed, gates: ReadonlySet<string>): boolean {
  if (w.kind.kind === "validation") return gates.has(w.pattern.subject);
  return w.kind.kind === "command" && gates.has(w.kind.command.trim());
}

function failedLine(w: Weighed): string {
  const last = w.pattern.lastErrors[0];
  const error = last ? `; last error: ${last.replace(/\s+/g, " ")}` : "";
  return `- ${label(w)}: failed ${w.pattern.failures} of ${w.calls} times${error}`;
}

/**
 * The prompt section "Learned from earlier runs", or null when there is nothing to tell.
 * `gates` are the run's own validation commands: they are the goal, not an approach to drop,
 * so one that kept failing is told apart ("change how you meet it"), and the agent running
 * one itself (a test run before the fix fails) is no advice at all.
 */
export function renderLearnedPatterns(
  patterns: readonly FailurePattern[],
  gates: readonly string[] = [],
): string | null {
  // A long command's pattern holds it cut (boundedKeyPart).
  const gateSet = new Set(gates.flatMap((g) => [g.trim(), boundedKeyPart(g)]));
  const { failed: anyFailed, worked } = relevant(patterns);
  const failed = anyFailed.filter((w) => !isGate(w, gateSet));
  const failedGates = anyFailed.filter((w) => w.kind.kind === "validation" && isGate(w, gateSet));
  if (failed.length === 0 && failedGates.length === 0 && worked.length === 0) return null;
  const parts: string[] = [];
  if (failed.length > 0) {
    parts.push(
      "These approaches failed before in this workspace (do not repeat them as they were; change the approach):",
      ...failed.map(failedLine),
    );
  }
  if (failedGates.length > 0) {
    parts.push(
      "Checks of this task that kept failing in this workspace (they must pass: what was tried did not make them, so change how you meet them):",
      ...failedGates.map(failedLine),
    );
  }
  if (worked.length > 0) {
    parts.push(
      "These worked before (prefer them):",
      ...worked.map(
        (w) =>
          `- ${label(w)}: succeeded ${w.pattern.successes} of ${w.calls} times (mean ${meanMs(w.pattern)} ms)`,
      ),
    );
  }
  return parts.join("\n");
}
