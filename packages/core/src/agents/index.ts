export type { CommandAgentInput } from "./command-agent";
export { hasCompletionPromise, runCommandAgent } from "./command-agent";
export type { PromptInput } from "./prompt";
export { buildPrompt } from "./prompt";
