import { describe, expect, it } from "vitest";
import { isoTime } from "../src/iso-time";

describe("isoTime", () => {
  it("writes what toISOString writes, across minutes, days, years and the edges of the table", () => {
    const times = [
      0,
      1,
      59_999,
      60_000,
      1_800_000_000_000,
      1_800_000_059_999,
      951_782_400_000, // 2000-02-29
      253_402_300_799_999, // the last millisecond of year 9999
    ];
    // A run's events: many in one minute, then the next one (the kept prefix must change).
    for (let t = 1_800_000_000_000; t < 1_800_000_200_000; t += 997) times.push(t);
    // Anywhere up to year 9999, in an order that leaves no minute kept.
    let seed = 7;
    for (let i = 0; i < 20_000; i++) {
      seed = (seed * 48_271) % 2_147_483_647;
      times.push(Math.floor((seed / 2_147_483_647) * 253_402_300_799_999));
    }
    for (const t of times) expect(isoTime(t), String(t)).toBe(new Date(t).toISOString());
  });

  it("leaves to Date what the table does not hold, as Date writes it", () => {
    for (const t of [-1, -86_400_001, 253_402_300_800_000, 8.64e15, 1_800_000_000_000.7, -0.5])
      expect(isoTime(t), String(t)).toBe(new Date(t).toISOString());
    expect(() => isoTime(Number.NaN)).toThrow(RangeError);
    expect(() => isoTime(8.64e15 + 1)).toThrow(RangeError);
  });
});
