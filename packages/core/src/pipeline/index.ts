export { packageChange } from "./packaging";
export { buildPhasePrompt, PHASE_INSTRUCTIONS, renderPhaseArtifacts } from "./phase-prompt";
export type { PhaseRunInput, PhaseRunResult } from "./phase-runner";
export { runPreparationPhase } from "./phase-runner";
