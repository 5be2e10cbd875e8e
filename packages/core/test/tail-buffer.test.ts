import { describe, expect, it } from "vitest";
import { TailBuffer } from "../src/process/tail-buffer";

describe("TailBuffer", () => {
  it("keeps the last bytes whole: a cut inside a character omits its rest, counted", () => {
    for (const [char, cap] of [
      ["€", 100], // 3 bytes: the cut leaves 1 continuation byte
      ["€", 101], // … or 2
      ["😀", 101], // 4 bytes: 1
      ["😀", 103], // … or 3
    ] as const) {
      const buffer = new TailBuffer(cap);
      const printed = Buffer.from(`start\n${char.repeat(500)}`);
      // In pieces, as a pipe gives them (a piece may end inside a character).
      for (let i = 0; i < printed.length; i += 7) buffer.write(printed.subarray(i, i + 7));
      const text = buffer.toString();
      const [line, kept = ""] = text.split("\n");
      expect(kept).not.toContain("\uFFFD");
      expect(kept).toBe(char.repeat(kept.length / char.length));
      const omitted = Number(
        /^\[… (\d+) bytes of earlier output omitted …\]$/.exec(line ?? "")?.[1],
      );
      expect(omitted + Buffer.byteLength(kept)).toBe(printed.length);
      expect(Buffer.byteLength(kept)).toBeGreaterThan(cap - 4);
    }
  });

  it("leaves output under the cap as it is, invalid bytes included", () => {
    const buffer = new TailBuffer(100);
    buffer.write(Buffer.from([0x80, 0x61]));
    expect(buffer.toString()).toBe("\uFFFDa");
  });
});
