export {
  endWait,
  feedbackWithReply,
  planFromEdit,
  renderEditedPlan,
  waitingProgress,
} from "./approval-transitions";
export type { IterationDecision, IterationFacts } from "./decide";
export { decideIteration, MAX_CONSECUTIVE_FAILURES, REVIEW_FEEDBACK_BYTES } from "./decide";
export { failRun } from "./fail-run";
export type { EngineLogger, EngineResources, StepOptions } from "./resources";
export { runStep } from "./run-step";
export type {
  ClaimedRun,
  ClaimStart,
  IterationPatch,
  MutationExtras,
  RunMutation,
  RunPatch,
  RunStore,
  WorkspaceHold,
} from "./run-store";
export { runRowChanges, startsOnClaim } from "./run-store";
export { closeSnapshotsOf, SNAPSHOT_DEFAULTS } from "./snapshot-step";
export type { StepResult } from "./step-result";
