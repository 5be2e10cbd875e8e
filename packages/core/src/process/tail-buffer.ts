import { capTailBytes } from "../util/cut-marks";

/** Keeps the last `capBytes` bytes written to it, and counts what it dropped. */
export class TailBuffer {
  private chunks: Buffer[] = [];
  private size = 0;
  dropped = 0;

  constructor(private readonly capBytes: number) {}

  write(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    // Compact only when well over the cap, so a flood costs amortised O(1) per byte.
    if (this.size > this.capBytes * 2) this.compact();
  }

  private compact(): void {
    const all = Buffer.concat(this.chunks);
    const keep = all.subarray(Math.max(0, all.length - this.capBytes));
    this.dropped += all.length - keep.length;
    this.chunks = [Buffer.from(keep)];
    this.size = keep.length;
  }

  toString(): string {
    this.compact();
    const kept = Buffer.concat(this.chunks);
    // A cut inside a character leaves no continuation bytes (U+FFFD the command never
    // printed): they count with what was omitted.
    return capTailBytes(kept, this.capBytes, kept.length + this.dropped, "earlier output");
  }
}
