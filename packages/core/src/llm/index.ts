export type {
  ChatMessage,
  ChatModel,
  ChatRequest,
  ChatResponse,
  ChatTool,
  ChatToolCall,
  ChatUsage,
} from "./chat-model";
export { ChatModelError } from "./chat-model";
export type { MistralChatModelOptions } from "./mistral-chat-model";
export { MistralChatModel } from "./mistral-chat-model";
