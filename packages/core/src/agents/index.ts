export type { CommandAgentInput, CommandAgentResult } from "./command-agent";
export { removeStaleTempDirs, runCommandAgent } from "./command-agent";
export { CompletionPromiseScanner } from "./completion-promise";
export { AGENT_TOOL_NAMES } from "./mistral-agent";
export { renderPlan } from "./plan";
export type { PromptInput } from "./prompt";
export { buildPrompt } from "./prompt";
