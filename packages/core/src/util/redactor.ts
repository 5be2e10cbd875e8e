import { headCut, mayBeCut, tailCut } from "./cut-marks";
import { forPrompt } from "./for-prompt";

/** Common shapes of credentials, redacted wherever they appear. */
const PATTERNS: RegExp[] = [
  /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g,
  /\b(?:sk|pk|rk)-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}\b/g,
  /\bgh[pousr]_[A-Za-z0-9]{30,}\b/g,
  /\bgithub_pat_[A-Za-z0-9_]{30,}\b/g,
  /\bxox[abprs]-[A-Za-z0-9-]{10,}\b/g,
  /\bAKIA[0-9A-Z]{16}\b/g,
  /\bAIza[0-9A-Za-z_-]{35}\b/g,
  /\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\b/g,
  /(\bBearer\s+)[A-Za-z0-9._~+/=-]{16,}/gi,
  // The password of a URL (`postgres://user:PASSWORD@host/db`), whatever its length; not a
  // variable named in its place (`${DB_PASS}`, `$DB_PASS`), which a command expands.
  /(\b[a-z][a-z0-9+.-]*:\/\/[^\s:/@]*:)(?!\$(?:\{\w+\}|\w+)@)[^\s@/]+(?=@)/gi,
  // The value stops at shell punctuation, so a redacted command keeps its structure; a value
  // that is only a variable (`TOKEN=${GITHUB_TOKEN}`) is a name, not a secret.
  /(\b[A-Z0-9_]*(?:API_KEY|APIKEY|SECRET|TOKEN|PASSWORD|PASSWD)[A-Z0-9_]*\s*[=:]\s*["']?)(?!\$(?:\{\w+\}|\w+)(?:[\s"'&;|<>()`]|$))[^\s"'&;|<>()`]{8,}/gi,
];

/**
 * A necessary condition for any of PATTERNS to match (each needs one of these): text without
 * any is left alone after one scan instead of one per pattern — most of what is redacted
 * (keys, commands, outputs) has none. Keep it in step with PATTERNS (redactor.test.ts has an example of each).
 */
const MAYBE_SECRET =
  /-----BEGIN|\b[spr]k-|\bgh[pousr]_|github_pat_|\bxox[abprs]-|\bAKIA|\bAIza|\beyJ|bearer|:\/\/|api_?key|secret|token|passw/i;

export const REDACTED = "[REDACTED]";

/** Shorter values are not redacted (they would redact ordinary words): no secret may be shorter. */
export const MIN_SECRET_LENGTH = 6;

/** Escapes, carriage returns and other control bytes: text a terminal shows otherwise. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is its purpose
const TERMINAL_BYTES = /[\u0000-\u0008\u000b-\u001f\u007f\u009b]/;

/**
 * Removes secrets from text before it is stored, queued, emitted or logged: the exact values
 * it was given (API_TOKEN, MISTRAL_API_KEY, configured secrets) and common key patterns.
 */
export class Redactor {
  private readonly values: string[];

  constructor(secretValues: readonly (string | undefined)[] = []) {
    // Longest first, so a secret that contains another is replaced whole. Very short values
    // would redact ordinary words; they are not secrets worth the name.
    this.values = [
      ...new Set(
        secretValues.filter(
          (v): v is string => typeof v === "string" && v.length >= MIN_SECRET_LENGTH,
        ),
      ),
    ].sort((a, b) => b.length - a.length);
  }

  text(input: string): string {
    const out = this.plain(input);
    if (!TERMINAL_BYTES.test(out)) return out;
    // A secret a terminal shows whole may be cut by an escape in the bytes (`tok-\x1b[0m…`):
    // then the text is kept as a terminal shows it, redacted (its escapes are lost).
    const shown = forPrompt(out);
    const redacted = this.plain(shown);
    return redacted === shown ? out : redacted;
  }

  private plain(input: string): string {
    let out = input;
    for (const value of this.values) {
      if (out.includes(value)) out = out.split(value).join(REDACTED);
    }
    if (mayBeCut(out)) out = redactCutPieces(out, this.values);
    if (!MAYBE_SECRET.test(out)) return out;
    for (const pattern of PATTERNS) {
      out = out.replace(pattern, (match, prefix?: unknown) =>
        typeof prefix === "string" && match.startsWith(prefix) ? `${prefix}${REDACTED}` : REDACTED,
      );
    }
    return out;
  }

  /** This redactor with more secret values to replace. */
  with(secretValues: readonly string[]): Redactor {
    return new Redactor([...this.values, ...secretValues]);
  }

  /** Redacts every string inside a JSON-like value (objects, arrays), keys included. */
  deep<T>(value: T): T {
    return this.walk(value) as T;
  }

  /**
   * The dotted paths (`agent.command`, `validationCommands.0`) of the strings inside a
   * JSON-like value that redaction would change, keys included (at the key's own path).
   */
  changedPaths(value: unknown, path: readonly string[] = []): string[] {
    if (typeof value === "string") return this.text(value) === value ? [] : [path.join(".")];
    if (value === null || typeof value !== "object") return [];
    const entries = Array.isArray(value)
      ? value.map((v, i) => [String(i), v] as const)
      : Object.entries(value);
    return entries.flatMap(([k, v]) => {
      const at = [...path, k];
      return [...(this.text(k) === k ? [] : [at.join(".")]), ...this.changedPaths(v, at)];
    });
  }

  private walk(value: unknown): unknown {
    if (typeof value === "string") return this.text(value);
    if (Array.isArray(value)) return value.map((v) => this.walk(v));
    if (value !== null && typeof value === "object") {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[this.text(k)] = this.walk(v);
      return out;
    }
    return value;
  }
}

/** The shortest piece of a secret, cut by a cap at a text's edge, that is still redacted. */
const MIN_PIECE = 6;

/**
 * Text is capped before it is redacted (an output's tail, a tool result's head), so a cap can
 * cut through a secret and leave a piece of it at the cut: a kept tail may begin with the end
 * of one, right after the line that says what was omitted, and a kept head may end with its
 * start, right before the line that says what was cut. Such pieces go too. Only at those
 * marks: elsewhere a short word that a secret happens to begin with ("mistral" of
 * "mistral-…") is left alone.
 */
function redactCutPieces(text: string, values: readonly string[]): string {
  let out = text;
  const start = tailCut(out);
  if (start !== undefined) {
    const piece = longestPiece(values, (p) => out.startsWith(p, start), "end");
    if (piece > 0) out = out.slice(0, start) + REDACTED + out.slice(start + piece);
  }
  const end = headCut(out);
  if (end !== undefined) {
    const piece = longestPiece(values, (p) => out.startsWith(p, end - p.length), "start");
    if (piece > 0) out = out.slice(0, end - piece) + REDACTED + out.slice(end);
  }
  return out;
}

/**
 * The length of the longest proper end (or start) of one of `values`, at least MIN_PIECE long,
 * that `found` finds in the text; 0 when there is none.
 */
function longestPiece(
  values: readonly string[],
  found: (piece: string) => boolean,
  side: "start" | "end",
): number {
  let longest = 0;
  for (const value of values) {
    for (let length = value.length - 1; length >= Math.max(MIN_PIECE, longest + 1); length--) {
      if (found(side === "end" ? value.slice(-length) : value.slice(0, length))) {
        longest = length;
        break;
      }
    }
  }
  return longest;
}

// `PAT` (a personal access token: GH_PAT) only as a word of the name: not PATH, not PATTERN.
const SECRET_NAME = /KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|(?:^|[_-])PAT(?:[_-]|$)/i;

/** Whether a variable's (or a header's) name says that its value is a secret. */
export function looksSecret(name: string): boolean {
  return SECRET_NAME.test(name);
}

/** Variables holding URLs whose password (in the authority, or a parameter named as a secret is:
 * `password`, node-postgres' `sslpassword`) is secret. */
const URL_VARIABLES = ["DATABASE_URL", "REDIS_URL"];

/** A URL's password as written and decoded, and the URL itself when it has one. */
function urlSecrets(url: string | undefined): string[] {
  if (!url) return [];
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return [];
  }
  const passwords = [
    parsed.password,
    ...[...parsed.searchParams].filter(([name]) => looksSecret(name)).map(([, value]) => value),
  ].filter(Boolean);
  if (passwords.length === 0) return [];
  const decoded = passwords.map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  return [url, ...passwords, ...decoded];
}

/**
 * The secret values an app knows of: `API_TOKEN`, `MISTRAL_API_KEY`, the passwords in
 * `DATABASE_URL` and `REDIS_URL`, the variables named in `names` (e.g. `LOOPRUN_SECRET_ENV`),
 * and allowlisted variables whose names look secret.
 */
export function collectSecrets(
  source: Record<string, string | undefined>,
  names: readonly string[] = [],
  allowlist: readonly string[] = [],
): string[] {
  const wanted = new Set([
    "API_TOKEN",
    "MISTRAL_API_KEY",
    ...names,
    ...allowlist.filter((n) => SECRET_NAME.test(n)),
  ]);
  return [
    ...[...wanted].map((n) => source[n]),
    ...URL_VARIABLES.flatMap((n) => urlSecrets(source[n])),
  ].filter((v): v is string => typeof v === "string" && v.length > 0);
}

/** An error as a log line shows it (pino's `err` fields), as plain data a redactor can walk. */
export function errorFields(error: Error): { type: string; message: string; stack?: string } {
  return { type: error.name, message: error.message, stack: error.stack };
}

/**
 * pino options that pass every log line through the redactor (objects, errors, messages),
 * so no secret reaches the logs. Plain functions: the apps own their logger.
 */
export function redactingLogOptions(redactor: Redactor) {
  const plain = (value: unknown): unknown => {
    if (value instanceof Error) return errorFields(value);
    if (Array.isArray(value)) return value.map(plain);
    if (value !== null && typeof value === "object") {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
    }
    return value;
  };
  return {
    formatters: {
      log: (obj: Record<string, unknown>) => redactor.deep(plain(obj)) as Record<string, unknown>,
    },
    hooks: {
      logMethod(this: unknown, args: unknown[], method: (...a: unknown[]) => void) {
        method.apply(
          this,
          args.map((a) => (typeof a === "string" ? redactor.text(a) : a)),
        );
      },
    },
  };
}
