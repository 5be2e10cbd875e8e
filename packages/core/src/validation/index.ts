export type { GateReport } from "./gates";
export { describeGates, gateReport } from "./gates";
export type { ValidationInput, ValidationOutcome } from "./validation-runner";
export { runValidation, validationFeedback } from "./validation-runner";
