/** An error's message, or the thrown value as text. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A worker's claim on a run was superseded (its epoch is stale): it must write nothing more. */
export class LeaseLostError extends Error {
  override readonly name = "LeaseLostError";
  constructor(
    readonly runId: string,
    readonly epoch: number,
  ) {
    super(`lease on run ${runId} lost (epoch ${epoch} is stale)`);
  }
}

/** The session already has an active run. */
export class RunAlreadyActiveError extends Error {
  override readonly name = "RunAlreadyActiveError";
  constructor(
    readonly sessionId: string,
    readonly activeRunId: string,
  ) {
    super(`session ${sessionId} already has an active run (${activeRunId})`);
  }
}
