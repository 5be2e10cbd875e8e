/** The SQLSTATE of a PostgreSQL error, also when drizzle wrapped it (`DrizzleQueryError.cause`). */
export function pgErrorCode(error: unknown): string | undefined {
  for (let e = error, depth = 0; e !== null && typeof e === "object" && depth < 4; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The constraint a PostgreSQL error names, if any. */
function pgConstraint(error: unknown): string | undefined {
  for (let e = error, depth = 0; e !== null && typeof e === "object" && depth < 4; depth++) {
    const constraint = (e as { constraint?: unknown }).constraint;
    if (typeof constraint === "string") return constraint;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** A unique violation (23505), of the given constraint or index when one is named. */
export function isPgUniqueViolation(error: unknown, constraint?: string): boolean {
  if (pgErrorCode(error) !== "23505") return false;
  return constraint === undefined || pgConstraint(error) === constraint;
}
