export type { ValidationInput, ValidationOutcome } from "./validation-runner";
export { runValidation, validationFeedback } from "./validation-runner";
