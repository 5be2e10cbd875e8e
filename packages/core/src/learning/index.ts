export { argumentShape } from "./argument-shape";
export { mergeCandidates, promptCandidates, renderLearnedPatterns } from "./pattern-advice";
export { toolCallShape } from "./pattern-keys";
export type { FailurePattern, PatternDelta, PatternObservation } from "./patterns";
export {
  foldPattern,
  MAX_PATTERNS_PER_WORKSPACE,
  observationsOf,
  patternDeltas,
} from "./patterns";
