import type { PhaseArtifact } from "../domain/artifacts";
import type { RunSpec } from "../domain/run-spec";
import { renderLearnedPatterns } from "../learning/pattern-advice";
import type { FailurePattern } from "../learning/patterns";
import { renderPhaseArtifacts } from "../pipeline/phase-prompt";
import { forPrompt } from "../util/for-prompt";
import { gatesNeeded } from "../validation/gates";
import {
  renderSessionHistory,
  renderToolFailures,
  type SessionRunSummary,
  type ToolFailure,
} from "./session-context";

export interface PromptInput {
  spec: RunSpec;
  iteration: number;
  /** What the previous iteration found wrong, if any. */
  feedback: string | null;
  /** Earlier runs of the same session, newest first. */
  history?: readonly SessionRunSummary[];
  /** Tool calls of this run that failed, so they are not repeated. */
  toolFailures?: readonly ToolFailure[];
  /** What the run's preparation phases (planning, architecture, design) produced. */
  phaseArtifacts?: readonly PhaseArtifact[];
  /** What earlier runs in the workspace learned (tools and commands that failed or worked). */
  learned?: readonly FailurePattern[];
}

/** The text an agent receives: the task, its requirements and the previous feedback. */
export function buildPrompt({
  spec,
  iteration,
  feedback,
  history = [],
  toolFailures = [],
  phaseArtifacts = [],
  learned = [],
}: PromptInput): string {
  const parts = [`# Task\n\n${spec.task}`];
  if (spec.requirements) parts.push(`# Requirements\n\n${spec.requirements}`);
  if (spec.filePaths.length > 0) {
    parts.push(`# Focus files\n\n${spec.filePaths.map((p) => `- ${p}`).join("\n")}`);
  }
  const preparation = renderPhaseArtifacts(phaseArtifacts);
  if (preparation) parts.push(`# Preparation\n\n${forPrompt(preparation)}`);
  const total = spec.validationCommands.length;
  const needed = gatesNeeded(total, spec.successThreshold);
  const gates: string[] =
    needed < total
      ? [
          `- at least ${needed} of these ${total} commands must exit 0:`,
          ...spec.validationCommands.map((c) => `  - \`${c}\``),
        ]
      : spec.validationCommands.map((c) => `- \`${c}\` must exit 0`);
  if (spec.completionPromise !== null) {
    gates.push(
      `- when the task is complete, print <promise>${spec.completionPromise}</promise> on its own line`,
    );
  }
  if (spec.review.type !== "none") {
    gates.push(`- a ${spec.review.type} reviewer of your change must find no blocking issue`);
  }
  if (gates.length > 0) parts.push(`# Done when\n\n${gates.join("\n")}`);
  if (history.length > 0) {
    parts.push(`# Earlier runs in this session (newest first)\n\n${renderSessionHistory(history)}`);
  }
  parts.push(`# Iteration\n\nThis is iteration ${iteration} of at most ${spec.maxIterations}.`);
  if (feedback) {
    parts.push(`# Feedback from the previous iteration\n\n${forPrompt(feedback)}`);
  }
  if (toolFailures.length > 0) {
    parts.push(
      `# Tool calls that failed so far (do not repeat them)\n\n${forPrompt(renderToolFailures(toolFailures))}`,
    );
  }
  const lessons = renderLearnedPatterns(learned, spec.validationCommands);
  if (lessons) parts.push(`# Learned from earlier runs\n\n${forPrompt(lessons)}`);
  return `${parts.join("\n\n")}\n`;
}
