import { keptTail } from "../util/cut-marks";

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
    let kept = Buffer.concat(this.chunks);
    let dropped = this.dropped;
    if (dropped > 0) {
      // The cut may fall inside a character: its continuation bytes (10xxxxxx, at most 3)
      // would read as U+FFFD the command never printed. They go with what was omitted.
      let start = 0;
      while (start < 3 && start < kept.length && ((kept[start] ?? 0) & 0xc0) === 0x80) start++;
      kept = kept.subarray(start);
      dropped += start;
    }
    const text = kept.toString("utf8");
    return dropped > 0 ? keptTail(`${dropped} bytes of earlier output`, text) : text;
  }
}
