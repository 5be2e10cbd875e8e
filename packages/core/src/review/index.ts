export type { JsonAnswer } from "../util/json-answer";
export { parseJsonAnswer } from "../util/json-answer";
export type { CommandReviewInput } from "./command-reviewer";
export { MAX_REVIEW_OUTPUT_BYTES, runCommandReview } from "./command-reviewer";
export type { LlmCallOptions } from "./llm-ask";
export { askForJson, askForText } from "./llm-ask";
export type { LlmReviewOptions } from "./mistral-reviewer";
export { REVIEW_SYSTEM, runMistralReview } from "./mistral-reviewer";
export { reviewFeedback } from "./review-feedback";
export type { ReviewOutcome } from "./review-findings";
export { ReviewFindings } from "./review-findings";
export type { ReviewInput } from "./review-input";
export { capDiff, renderValidation } from "./review-input";
export {
  BLIND_SYSTEM,
  DISCREPANCY_SYSTEM,
  DiscrepancyReport,
  runTriangularReview,
} from "./triangular-reviewer";
