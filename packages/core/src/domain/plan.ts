export type StepStatus = "todo" | "in_progress" | "done" | "failed";

export interface PlanStep {
  id: number;
  title: string;
  detail: string | null;
  status: StepStatus;
  failures: number;
  note: string | null;
}

/** A run's plan as stored: re-planning bumps `version`. */
export interface Plan {
  version: number;
  steps: PlanStep[];
  /** Why the last re-plan happened. */
  reason: string | null;
}
