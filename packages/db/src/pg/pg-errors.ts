/** The error and the errors it wraps (`cause`: drizzle wraps the driver's), outermost first. */
function* causes(error: unknown): Generator<object> {
  for (let e = error, depth = 0; e !== null && typeof e === "object" && depth < 5; depth++) {
    yield e;
    e = (e as { cause?: unknown }).cause;
  }
}

/** The SQLSTATE of a PostgreSQL error, also when drizzle wrapped it (`DrizzleQueryError.cause`). */
export function pgErrorCode(error: unknown): string | undefined {
  for (const e of causes(error)) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return undefined;
}

/** The constraint a PostgreSQL error names, if any. */
function pgConstraint(error: unknown): string | undefined {
  for (const e of causes(error)) {
    const constraint = (e as { constraint?: unknown }).constraint;
    if (typeof constraint === "string") return constraint;
  }
  return undefined;
}

/** A unique violation (23505), of the given constraint or index when one is named. */
export function isPgUniqueViolation(error: unknown, constraint?: string): boolean {
  if (pgErrorCode(error) !== "23505") return false;
  return constraint === undefined || pgConstraint(error) === constraint;
}

/*
 * Which errors of PostgreSQL (or of the connection to it) are the database being unavailable
 * for now rather than a fault of the call: worth trying the same call again later.
 */

const NODE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
]);

const SQLSTATES = new Set([
  "57P01", // admin_shutdown: the server is stopping (a restart, a failover)
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now: starting or recovering
  "53300", // too_many_connections
  "40001", // serialization_failure
  "40P01", // deadlock_detected: this transaction was the victim
  "55P03", // lock_not_available (lock_timeout)
  "25P03", // idle_in_transaction_session_timeout: the session was ended
]);

/** node-postgres' own errors for a connection that went away (they carry no code). */
const CONNECTION_MESSAGES =
  /^(Connection terminated|Client has encountered a connection error|timeout exceeded when trying to connect|Client was closed)/;

function isUnavailableOne(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string") {
    // Class 08: connection exceptions — but a protocol violation (08P01) is a bug that would
    // repeat on every try.
    if (code.startsWith("08") && code !== "08P01") return true;
    if (SQLSTATES.has(code) || NODE_CODES.has(code)) return true;
  }
  return CONNECTION_MESSAGES.test(error.message);
}

/** The error, or one it wraps, is one of those. */
export function isPgUnavailable(error: unknown): boolean {
  for (const e of causes(error)) if (isUnavailableOne(e)) return true;
  return false;
}
