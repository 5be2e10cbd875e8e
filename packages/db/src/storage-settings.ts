import { envInt } from "@looprun/core";
import { z } from "zod";

/** `DATABASE_URL`: empty counts as unset; the message never repeats the value (a password). */
const databaseUrl = z.preprocess(
  (v) => (typeof v === "string" && v.trim() === "" ? undefined : v),
  z
    .string()
    .refine((v) => /^postgres(ql)?:\/\/\S+$/i.test(v), {
      message: "must be a postgres:// or postgresql:// URL (unset it to use DATABASE_PATH)",
      abort: true,
    })
    .refine((v) => URL.canParse(v), {
      message:
        "is a postgres:// URL that does not parse: percent-encode the special characters of its user and password (`#` as %23, `@` as %40, `/` as %2F, `?` as %3F), and check its port (1-65535)",
    })
    .optional(),
);

/**
 * Where the data is, as every app reads it from its environment (each spreads these into its
 * own `env.ts` schema): the same names, defaults and messages for the API and the workers.
 */
export const StorageSettings = {
  /** The SQLite file (when DATABASE_URL is unset). */
  DATABASE_PATH: z.string().min(1).default(".looprun/looprun.db"),
  /**
   * A PostgreSQL database (`postgres://` or `postgresql://`): the store that API and worker
   * processes on several hosts share. Wins over DATABASE_PATH. Its password never reaches logs.
   */
  DATABASE_URL: databaseUrl,
  /** PostgreSQL: connections in this process's pool. */
  DATABASE_POOL_SIZE: envInt(1, 1000).default(10),
};
