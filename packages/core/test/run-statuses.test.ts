import { describe, expect, it } from "vitest";
import {
  ACTIVE_STATUSES,
  isActive,
  isTerminal,
  RUN_STATUSES,
  TERMINAL_STATUSES,
} from "../src/index";

describe("run statuses", () => {
  it("split into active (holding their session) and terminal, with no status in both or neither", () => {
    for (const status of RUN_STATUSES) expect(isActive(status)).toBe(!isTerminal(status));
    expect(RUN_STATUSES.filter(isActive)).toEqual([...ACTIVE_STATUSES]);
    expect(RUN_STATUSES.filter(isTerminal)).toEqual([...TERMINAL_STATUSES]);
  });

  it("reads a stored row's status as a plain string: anything else is not active", () => {
    expect(isActive("running")).toBe(true);
    expect(isActive("Running")).toBe(false);
    expect(isActive("")).toBe(false);
  });
});
