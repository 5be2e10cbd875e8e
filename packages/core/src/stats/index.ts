export type { Convergence } from "./convergence";
export { computeConvergence } from "./convergence";
