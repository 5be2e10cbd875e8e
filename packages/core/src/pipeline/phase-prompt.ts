import type { PhaseArtifact, PreparationPhase } from "../domain/artifacts";
import type { RunSpec } from "../domain/run-spec";
import { renderLearnedPatterns } from "../learning/pattern-advice";
import type { FailurePattern } from "../learning/patterns";
import { forPrompt } from "../util/for-prompt";

/** What each preparation phase is asked to produce. */
export const PHASE_INSTRUCTIONS: Record<PreparationPhase, string> = {
  planning:
    "Plan the work: an ordered list of concrete steps, the files likely to change, and the risks to watch for.",
  architecture:
    "Describe the architecture of the change: the components and modules involved, how data flows between them, and how it fits the existing code.",
  design:
    "Detail the design: interfaces and function signatures, data shapes, error handling, and the tests that will show it works.",
};

const TITLES: Record<PreparationPhase, string> = {
  planning: "Plan",
  architecture: "Architecture",
  design: "Design",
};

/** Earlier phases' artifacts as prompt sections, in phase order. */
export function renderPhaseArtifacts(artifacts: readonly PhaseArtifact[]): string {
  return artifacts
    .filter((a): a is PhaseArtifact & { phase: PreparationPhase } => a.phase in TITLES)
    .map((a) => `## ${TITLES[a.phase]} (${a.phase} phase)\n\n${a.content.trim()}`)
    .join("\n\n");
}

/** The prompt of a preparation phase: the task, its requirements, the earlier phases, the ask. */
export function buildPhasePrompt(
  spec: RunSpec,
  phase: PreparationPhase,
  earlier: readonly PhaseArtifact[],
  learned: readonly FailurePattern[] = [],
): string {
  const parts = [`# Task\n\n${spec.task}`];
  if (spec.requirements) parts.push(`# Requirements\n\n${spec.requirements}`);
  if (spec.filePaths.length > 0) {
    parts.push(`# Focus files\n\n${spec.filePaths.map((p) => `- ${p}`).join("\n")}`);
  }
  if (earlier.length > 0)
    parts.push(`# Earlier phases\n\n${forPrompt(renderPhaseArtifacts(earlier))}`);
  const lessons = renderLearnedPatterns(learned, spec.validationCommands);
  if (lessons) parts.push(`# Learned from earlier runs\n\n${forPrompt(lessons)}`);
  parts.push(
    `# Phase: ${phase}\n\nThis is the ${phase} phase, before any implementation: do not change any file. ${PHASE_INSTRUCTIONS[phase]} Answer in text (Markdown); your answer is handed to every implementation iteration.`,
  );
  return `${parts.join("\n\n")}\n`;
}
