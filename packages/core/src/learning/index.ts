export { argumentShape } from "./argument-shape";
export type { FailurePattern, PatternDelta, PatternObservation } from "./patterns";
export {
  byFailuresThenRecency,
  foldPattern,
  LAST_ERRORS_KEPT,
  mergeLastErrors,
  observationsOf,
  PATTERNS_FOR_PROMPT,
  patternDeltas,
  patternKey,
  relevantPatterns,
  renderLearnedPatterns,
} from "./patterns";
