export {
  AGENT_TOOL_NAMES,
  buildPrompt,
  CompletionPromiseScanner,
  removeStaleTempDirs,
  renderPlan,
} from "./agents/index";
export type { SessionRunSummary, ToolFailure } from "./agents/session-context";
export type { BudgetCheck, RunBudgetView } from "./budget/index";
export { budgetSnapshot, budgetView, checkBudget, deadlineFor } from "./budget/index";
export type { ApprovalMode, ApprovalRequest } from "./domain/approval";
export { APPROVAL_MODES, EditedPlan, isWaiting } from "./domain/approval";
export type {
  AgentResult,
  BudgetReason,
  BudgetSnapshot,
  EventRecord,
  EventType,
  IterationOutcome,
  IterationRecord,
  IterationSnapshot,
  IterationStatus,
  NewEvent,
  PartialSuccess,
  PhaseArtifact,
  PipelinePhase,
  PreparationPhase,
  ReviewArtifact,
  RunChange,
  RunMetrics,
  RunReason,
  RunRecord,
  RunSpec,
  RunStatus,
  SessionRecord,
  ValidationResult,
} from "./domain/index";
export {
  ABANDONED_AGENT_OUTPUT,
  ACTIVE_STATUSES,
  AgentSpec,
  abandonedAgent,
  abandonedAgentFinished,
  CommandAgentSpec,
  CommandReviewSpec,
  EMPTY_METRICS,
  EVENT_TYPES,
  isAbandonedAgent,
  isActive,
  isPreparationPhase,
  isTerminal,
  MistralReviewSpec,
  NOT_BLANK,
  normalizeSubmission,
  PhasesSpec,
  PIPELINE_PHASES,
  PREPARATION_PHASES,
  queuedRun,
  ReviewSpec,
  RUN_STATUSES,
  RunSubmission,
  SPEC_DEFAULTS,
  SPEC_LIMITS,
  TERMINAL_STATUSES,
  TriangularReviewSpec,
} from "./domain/index";
export { McpServerSpec } from "./domain/mcp-server-spec";
export type { Plan, PlanStep, StepStatus } from "./domain/plan";
export type { NewToolCall } from "./domain/run";
export { MistralAgentSpec } from "./domain/run-spec";
export type {
  ClaimedRun,
  ClaimStart,
  EngineLogger,
  EngineResources,
  IterationDecision,
  IterationFacts,
  IterationPatch,
  MutationExtras,
  RunMutation,
  RunPatch,
  RunStore,
  StepOptions,
  StepResult,
  WorkspaceHold,
} from "./engine/index";
export {
  closeSnapshotsOf,
  decideIteration,
  endWait,
  failRun,
  feedbackWithReply,
  MAX_CONSECUTIVE_FAILURES,
  planFromEdit,
  REVIEW_FEEDBACK_BYTES,
  renderEditedPlan,
  runRowChanges,
  runStep,
  SNAPSHOT_DEFAULTS,
  startsOnClaim,
  waitingProgress,
} from "./engine/index";
export type { FailurePattern, PatternDelta, PatternObservation } from "./learning/index";
export {
  argumentShape,
  foldPattern,
  MAX_PATTERNS_PER_WORKSPACE,
  mergeCandidates,
  observationsOf,
  patternDeltas,
  promptCandidates,
  renderLearnedPatterns,
  toolCallShape,
} from "./learning/index";
export type {
  ChatMessage,
  ChatModel,
  ChatRequest,
  ChatResponse,
  ChatTool,
  ChatToolCall,
  MistralChatModelOptions,
} from "./llm/index";
export { ChatModelError, MistralChatModel } from "./llm/index";
export type { PhaseRunInput, PhaseRunResult } from "./pipeline/index";
export {
  buildPhasePrompt,
  PHASE_INSTRUCTIONS,
  packageChange,
  renderPhaseArtifacts,
  runPreparationPhase,
} from "./pipeline/index";
export type { CommandResult, RunCommandOptions } from "./process/index";
export {
  buildCommandEnv,
  posixSpawnUnavailable,
  runCommand,
  TailBuffer,
  useLauncher,
} from "./process/index";
export { killRunOrphans } from "./process/orphans";
export { RUN_JOB_NAME, RUN_QUEUE, RunJob, runJobOptions, stopChannel } from "./queue/index";
export type {
  CommandReviewInput,
  JsonAnswer,
  LlmCallOptions,
  LlmReviewOptions,
  ReviewInput,
  ReviewOutcome,
} from "./review/index";
export {
  askForJson,
  askForText,
  BLIND_SYSTEM,
  capDiff,
  DISCREPANCY_SYSTEM,
  DiscrepancyReport,
  MAX_REVIEW_OUTPUT_BYTES,
  parseJsonAnswer,
  REVIEW_SYSTEM,
  ReviewFindings,
  renderValidation,
  reviewFeedback,
  runCommandReview,
  runMistralReview,
  runTriangularReview,
} from "./review/index";
export type {
  CappedText,
  GitOptions,
  GitResult,
  RestoredFile,
  RestoreResult,
  RunRecords,
  SnapshotGcOptions,
  SnapshotGcResult,
  SnapshotTarget,
  StoreWriter,
  WorkspaceSnapshotsOptions,
} from "./snapshots/index";
export {
  collectSnapshotGarbage,
  GitError,
  gitEnv,
  restoreWorkspace,
  runGit,
  SnapshotGcRefused,
  WorkspaceSnapshots,
} from "./snapshots/index";
export type { Convergence } from "./stats/index";
export { computeConvergence } from "./stats/index";
export type {
  HttpServerSpec,
  HubTool,
  JsonSchema,
  PathRefusal,
  StdioLaunch,
  StdioServerSpec,
  StdioWorkspaceServer,
  ToolCallOutcome,
  ToolHubOptions,
  WorkspaceServerOptions,
} from "./tools/index";
export {
  confinePath,
  createWorkspaceServer,
  FUNCTION_NAME_PATTERN,
  isWithin,
  McpConnectError,
  PathConfinementError,
  serveWorkspaceOverStdio,
  ToolHub,
  ToolNameAllocator,
  toMistralParameters,
  workspaceServerLaunch,
} from "./tools/index";
export { assertNever } from "./util/assert-never";
export { commaList } from "./util/comma-list";
export { envInt, envMs } from "./util/env-int";
export { LeaseLostError, messageOf, RunAlreadyActiveError } from "./util/errors";
export { forPrompt } from "./util/for-prompt";
export { keepYoungGenerationSmall } from "./util/heap-settings";
export { makeDirs } from "./util/make-dirs";
export { deepestExisting, movedAway, resolvedPath } from "./util/real-path";
export {
  collectSecrets,
  looksSecret,
  MIN_SECRET_LENGTH,
  REDACTED,
  Redactor,
  redactingLogOptions,
} from "./util/redactor";
