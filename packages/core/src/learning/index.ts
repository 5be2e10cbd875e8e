export { argumentShape } from "./argument-shape";
export { mergeCandidates, promptCandidates, renderLearnedPatterns } from "./pattern-advice";
export { toolCallShape } from "./pattern-keys";
export type { FailurePattern, PatternDelta, PatternObservation } from "./patterns";
export {
  byFailuresThenRecency,
  foldPattern,
  LAST_ERRORS_KEPT,
  MAX_PATTERNS_PER_WORKSPACE,
  mergeLastErrors,
  observationsOf,
  PATTERNS_FOR_PROMPT,
  patternDeltas,
  patternKey,
} from "./patterns";
