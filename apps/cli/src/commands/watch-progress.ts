import { describe, type EventView, phaseAfter, printable } from "./watch-events";

/** Where watch writes: a TTY gets a live progress line, anything else one line per event. */
export interface WatchOutput {
  write(text: string): unknown;
  isTTY?: boolean;
}

export const clock = (ms: number) => {
  const s = Math.floor(Math.max(0, ms) / 1000);
  return `${String(Math.floor(s / 60)).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}`;
};

/**
 * Event lines, and on a TTY a progress line below them, redrawn every second. What they show
 * comes from events (agent-produced text): it is written without control characters.
 */
export class Progress {
  private iteration = 0;
  private phase = "connecting";
  private resumePhase: string | null = null;
  private elapsedMs = 0;
  private readAt = Date.now();
  private ticking = false;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly out: WatchOutput,
    private readonly maxIterations: number,
    private readonly runId = "",
  ) {
    if (out.isTTY) {
      this.timer = setInterval(() => this.redraw(), 1000);
      this.timer.unref();
    }
  }

  event(e: EventView): void {
    const budget = e.data.budget as { elapsedMs?: number } | undefined;
    this.elapsedMs = budget?.elapsedMs ?? this.elapsedMs;
    this.readAt = Date.now();
    if (typeof e.data.iteration === "number") this.iteration = e.data.iteration;
    this.phase = phaseAfter(e, this.phase);
    // The clock stands still while the run waits for a person (the budget does not count it).
    this.ticking = !["run_queued", "run_finished", "approval_requested"].includes(e.type);
    const n =
      typeof e.data.iteration === "number" ? `${e.data.iteration}/${this.maxIterations} ` : "";
    this.print(`[${clock(this.elapsedMs)}] ${n}${describe(e, this.runId)}`);
  }

  /**
   * The stream is down: the attempt goes on the progress line (a TTY's), `notice` (once per
   * outage and reason) on a line of its own.
   */
  reconnecting(attempt: number, notice?: string): void {
    this.resumePhase ??= this.phase;
    this.phase = `reconnecting (attempt ${attempt})`;
    if (notice) this.print(notice);
    else if (this.out.isTTY) this.redraw();
  }

  /** The stream is back: the progress line shows what the run was doing. */
  connected(): void {
    if (this.resumePhase === null) return;
    this.phase = this.resumePhase;
    this.resumePhase = null;
    if (this.out.isTTY) this.redraw();
  }

  /** Clears the progress line and prints the outcome, if any. */
  finish(text?: string): void {
    if (this.timer) clearInterval(this.timer);
    if (this.out.isTTY) this.out.write("\r\x1b[2K");
    if (text) this.out.write(`${printable(text)}\n`);
  }

  private line(): string {
    const elapsed = this.elapsedMs + (this.ticking ? Date.now() - this.readAt : 0);
    const it =
      this.iteration > 0 ? `iteration ${this.iteration} of ${this.maxIterations}` : "not started";
    return printable(`▸ ${it} · ${this.phase} · ${clock(elapsed)} elapsed`);
  }

  private print(raw: string): void {
    const text = printable(raw);
    if (!this.out.isTTY) {
      this.out.write(`${text}\n`);
      return;
    }
    this.out.write(`\r\x1b[2K${text}\n${this.line()}`);
  }

  private redraw(): void {
    this.out.write(`\r\x1b[2K${this.line()}`);
  }
}
