export { confinePath, isWithin } from "./confine-path";
export type { PathRefusal } from "./errors";
export { McpConnectError, PathConfinementError } from "./errors";
export type { JsonSchema } from "./mistral-parameters";
export { toMistralParameters } from "./mistral-parameters";
export type { StdioWorkspaceServer } from "./serve-workspace-stdio";
export { serveWorkspaceOverStdio } from "./serve-workspace-stdio";
export type {
  HttpServerSpec,
  HubTool,
  McpServerSpec,
  StdioServerSpec,
  ToolCallOutcome,
  ToolHubOptions,
} from "./tool-hub";
export { ToolHub } from "./tool-hub";
export { FUNCTION_NAME_PATTERN, ToolNameAllocator } from "./tool-names";
export type { WorkspaceServerOptions } from "./workspace-server";
export { createWorkspaceServer } from "./workspace-server";
export type { StdioLaunch } from "./workspace-server-launch";
export {
  DEFAULT_COMMAND_TIMEOUT_MS,
  workspaceCallTimeoutMs,
  workspaceServerLaunch,
} from "./workspace-server-launch";
