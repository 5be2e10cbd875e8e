export { argumentShape } from "./argument-shape";
export {
  ADVISE_MIN_FAILURES,
  ADVISE_MIN_RATIO,
  COMMAND_ADVISE_MIN_RATIO,
  mergeCandidates,
  promptCandidates,
  relevantPatterns,
  renderLearnedPatterns,
  WORKED_MAX_RATIO,
} from "./pattern-advice";
export { errorKind, functionName, toolCallShape } from "./pattern-keys";
export type { FailurePattern, PatternDelta, PatternObservation } from "./patterns";
export {
  byFailuresThenRecency,
  byPatternKey,
  foldPattern,
  LAST_ERRORS_KEPT,
  MAX_PATTERNS_PER_WORKSPACE,
  mergeLastErrors,
  observationsOf,
  PATTERNS_FOR_PROMPT,
  patternDeltas,
  patternKey,
} from "./patterns";
