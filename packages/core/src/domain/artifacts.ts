/** The pipeline phases a run may list in `phases`, in the order they run. */
export const PIPELINE_PHASES = ["planning", "architecture", "design", "packaging"] as const;
export type PipelinePhase = (typeof PIPELINE_PHASES)[number];

/** Phases that run once, before iteration 1; their artifacts go into every iteration's prompt. */
export const PREPARATION_PHASES = ["planning", "architecture", "design"] as const;
export type PreparationPhase = (typeof PREPARATION_PHASES)[number];

export function isPreparationPhase(phase: PipelinePhase): phase is PreparationPhase {
  return (PREPARATION_PHASES as readonly string[]).includes(phase);
}

/** The text a pipeline phase produced (a plan, an architecture, a design, the packaged change). */
export interface PhaseArtifact {
  runId: string;
  phase: PipelinePhase;
  content: string;
  createdAt: number;
}

/** One reviewed iteration's verdict. Only `blockingIssues` sends the run back; `score` informs. */
export interface ReviewArtifact {
  id: string;
  runId: string;
  sessionId: string;
  phase: "review";
  iteration: number;
  blockingIssues: string[];
  nonBlockingIssues: string[];
  /** 0–100. */
  score: number;
  fixPlan: string[];
  createdAt: number;
}
