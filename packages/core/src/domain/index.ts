export type { ApprovalMode, ApprovalRequest } from "./approval";
export { APPROVAL_MODES, EditedPlan, isWaiting } from "./approval";
export type { PhaseArtifact, PipelinePhase, PreparationPhase, ReviewArtifact } from "./artifacts";
export { isPreparationPhase, PIPELINE_PHASES, PREPARATION_PHASES } from "./artifacts";
export type { BudgetSnapshot, EventRecord, EventType, NewEvent } from "./events";
export {
  ABANDONED_AGENT_OUTPUT,
  abandonedAgent,
  abandonedAgentFinished,
  EVENT_TYPES,
  isAbandonedAgent,
} from "./events";
export type {
  AgentResult,
  BudgetReason,
  IterationOutcome,
  IterationRecord,
  IterationStatus,
  PartialSuccess,
  RunMetrics,
  RunReason,
  RunRecord,
  RunStatus,
  SessionRecord,
  ValidationResult,
} from "./run";
export {
  ACTIVE_STATUSES,
  EMPTY_METRICS,
  isActive,
  isTerminal,
  queuedRun,
  RUN_STATUSES,
  TERMINAL_STATUSES,
} from "./run";
export type { RunSpec } from "./run-spec";
export {
  AgentSpec,
  CommandAgentSpec,
  CommandReviewSpec,
  MistralReviewSpec,
  NOT_BLANK,
  normalizeSubmission,
  PhasesSpec,
  ReviewSpec,
  RunSubmission,
  SPEC_DEFAULTS,
  SPEC_LIMITS,
  TriangularReviewSpec,
} from "./run-spec";
export type { IterationSnapshot, RunChange } from "./snapshots";
