export type { CommandAgentInput } from "./command-agent";
export { hasCompletionPromise, removeStalePromptDirs, runCommandAgent } from "./command-agent";
export { renderPlan } from "./plan";
export type { PromptInput } from "./prompt";
export { buildPrompt } from "./prompt";
