import { looksSecret } from "../util/redactor";

/**
 * Secrets live on the workers: a run names them as `${NAME}` (see agent-phase.ts), never
 * writes them out, since a run's settings are stored. These find a secret written out in an
 * MCP server's settings — a value under a secret name, a key in a URL, the value of a
 * `--token`-like argument — so that the submission is refused (400) rather than stored with
 * it, or stored redacted and then failing at the server.
 */

/** `${NAME}`: the value of a variable the workers allow (agent-phase.ts puts it in). */
export const VAR_REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;
/** An authorization scheme before the credentials (`Bearer ${TOKEN}`). */
const SCHEME = /^\s*(?:Bearer|Basic|Token|Bot)\s+/i;
/** Header names that hold credentials whatever they are called. */
const CREDENTIAL_HEADER = /^(?:authorization|proxy-authorization|cookie)$/i;

/**
 * Whether `value` writes out credentials, beyond `${NAME}` references and a scheme: eight or
 * more characters that are not all digits (`TOKEN_LIMIT: "4000"` is a setting, not a secret).
 */
export function writesOutSecret(value: string): boolean {
  const literal = value.replace(SCHEME, "").replace(VAR_REFERENCE, "").trim();
  return literal.length >= 8 && !/^\d+$/.test(literal);
}

/** The names (env or headers) whose values write out a secret. */
export function literalSecretNames(values: Record<string, string>, headers = false): string[] {
  return Object.entries(values)
    .filter(
      ([name, value]) =>
        (looksSecret(name) || (headers && CREDENTIAL_HEADER.test(name))) && writesOutSecret(value),
    )
    .map(([name]) => name);
}

/** The indexes of arguments that write out a secret: `--api-key VALUE`, `--token=VALUE`. */
export function literalSecretArgs(args: readonly string[]): number[] {
  const found: number[] = [];
  args.forEach((arg, i) => {
    const flag = /^--?([A-Za-z0-9_-]+)(?:=(.*))?$/s.exec(arg);
    if (!flag?.[1] || !looksSecret(flag[1])) return;
    if (flag[2] !== undefined) {
      if (writesOutSecret(flag[2])) found.push(i);
      return;
    }
    const next = args[i + 1];
    if (next !== undefined && !next.startsWith("-") && writesOutSecret(next)) found.push(i + 1);
  });
  return found;
}

/** Whether a URL carries credentials: a password, or a query parameter with a secret name. */
export function urlWritesOutSecret(url: string): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  if (parsed.password !== "") return true;
  return [...parsed.searchParams].some(
    ([name, value]) => looksSecret(name) && writesOutSecret(value),
  );
}
