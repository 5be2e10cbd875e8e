/** Limits on a submitted run, shared by the API (validation) and the docs. */
export const SPEC_LIMITS = {
  task: 20_000,
  requirements: 50_000,
  command: 4_000,
  listItems: 50,
  filePath: 1_000,
} as const;

/** Text handed to a process (a command, an argument, a variable): a NUL byte cannot be. */
export const NO_NUL = [
  (text: string) => !text.includes("\0"),
  "must not contain a NUL byte",
] as const;

/** A text that is trimmed first: blank (empty or only whitespace) is refused with this. */
export const NOT_BLANK = "must not be empty or only whitespace";
