export type { IterationDecision, IterationFacts } from "./decide";
export { decideIteration, MAX_CONSECUTIVE_FAILURES } from "./decide";
export { failRun } from "./fail-run";
export type { EngineLogger, EngineResources, StepOptions } from "./resources";
export type { StepResult } from "./run-step";
export { runStep } from "./run-step";
export type { ClaimedRun, IterationPatch, RunMutation, RunPatch, RunStore } from "./run-store";
export { mergeStatus } from "./run-store";
