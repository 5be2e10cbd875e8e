import { z } from "zod";

/**
 * A setting that lists names (variables, origins) separated by commas, as the apps' env.ts
 * parse it: its items trimmed, empty ones dropped; unset or empty, no items.
 */
export const commaList = z
  .string()
  .default("")
  .transform((s) =>
    s
      .split(",")
      .map((item) => item.trim())
      .filter(Boolean),
  );
