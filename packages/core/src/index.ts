export type { BudgetCheck, RunBudgetView } from "./budget/index";
export { budgetSnapshot, budgetView, checkBudget, deadlineFor } from "./budget/index";
export type {
  AgentResult,
  BudgetReason,
  BudgetSnapshot,
  EventRecord,
  EventType,
  IterationOutcome,
  IterationRecord,
  IterationStatus,
  NewEvent,
  RunMetrics,
  RunReason,
  RunRecord,
  RunSpec,
  RunStatus,
  SessionRecord,
  ValidationResult,
} from "./domain/index";
export {
  ACTIVE_STATUSES,
  AgentSpec,
  CommandAgentSpec,
  EMPTY_METRICS,
  EVENT_TYPES,
  isTerminal,
  normalizeSubmission,
  RUN_STATUSES,
  ReviewSpec,
  RunSubmission,
  SPEC_DEFAULTS,
  SPEC_LIMITS,
  TERMINAL_STATUSES,
} from "./domain/index";
export type {
  ClaimedRun,
  EngineLogger,
  EngineResources,
  IterationDecision,
  IterationFacts,
  IterationPatch,
  RunMutation,
  RunPatch,
  RunStore,
  StepOptions,
  StepResult,
} from "./engine/index";
export { decideIteration, failRun, MAX_CONSECUTIVE_FAILURES, mergeStatus, runStep } from "./engine/index";
export type { CommandResult, RunCommandOptions } from "./process/index";
export { buildCommandEnv, runCommand, TailBuffer } from "./process/index";
export { RUN_JOB_NAME, RUN_QUEUE, RunJob, runJobOptions, stopChannel } from "./queue/index";
export { assertNever } from "./util/assert-never";
export { LeaseLostError, RunAlreadyActiveError } from "./util/errors";
export { collectSecrets, REDACTED, Redactor, redactingLogOptions } from "./util/redactor";
export { buildPrompt, hasCompletionPromise } from "./agents/index";
export type { SessionRunSummary, ToolFailure } from "./agents/session-context";
export type { Plan, PlanStep, StepStatus } from "./domain/plan";
export type { NewToolCall } from "./domain/run";
export type { ChatMessage, ChatModel, ChatRequest, ChatResponse, ChatTool, ChatToolCall, MistralChatModelOptions } from "./llm/index";
export { ChatModelError, MistralChatModel } from "./llm/index";
export { McpServerSpec, MistralAgentSpec } from "./domain/run-spec";
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
