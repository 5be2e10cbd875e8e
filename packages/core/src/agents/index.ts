export type { CommandAgentInput, CommandAgentResult } from "./command-agent";
export { removeStalePromptDirs, runCommandAgent } from "./command-agent";
export { CompletionPromiseScanner } from "./completion-promise";
export { renderPlan } from "./plan";
export type { PromptInput } from "./prompt";
export { buildPrompt } from "./prompt";
